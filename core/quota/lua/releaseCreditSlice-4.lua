--[[
  Gives back what a relay's slice of an account's balance (takeCreditSlice-3.lua) still holds, in
  one of four ways:
   'trim'   the relay reserves no more from the slice but some of its requests are still running:
            the slice keeps ARGV[2] (what those requests reserved) and the rest goes back now;
   'return' every request of the slice is settled: the rest goes back (less than zero when the
            requests cost more than the slice: the excess is debited) and the slice is removed. A
            slice the reaper took meanwhile: what its tombstone holds goes back (as 'expire');
   'reap'   the reaper, for a slice whose deadline passed (its relay seemed dead), unless the relay
            renewed the deadline past ARGV[4] meanwhile: the slice becomes its tombstone, keeping
            the records of the requests it settled, so that a late settlement
            (settleSliceDraws-4n.lua) bills once, and it keeps holding the slice's amount for
            ARGV[6] ms more (member ARGV[5] of KEYS[3]). A relay paused past the slice's short
            deadline (a SIGSTOP, a VM frozen, cut from Redis) still has requests reserved from the
            slice in memory, which Redis does not know of: given back at once, the amount was spent
            by the account's other requests, and the resumed relay's settlements took the balance
            below zero. What a relay that is dead for good held comes back after ARGV[6];
   'expire' the reaper, for a tombstone whose hold passed ARGV[4] (or a relay returning it, with
            ARGV[4] empty): what it still holds goes back; its records stay.

  KEYS[1] the slice                (hash)
  KEYS[2] account balance
  KEYS[3] open reservations by deadline (sorted set)
  KEYS[4] the slice's tombstone    (hash: the slice's fields, `holding` 1 while it holds `amount`)

  ARGV[1] 'trim', 'return', 'reap' or 'expire'
  ARGV[2] trim: the amount the slice keeps
  ARGV[3] member of KEYS[3] naming the slice
  ARGV[4] reap, expire: the reaper's now (Unix ms)
  ARGV[5] member of KEYS[3] naming the tombstone's hold
  ARGV[6] reap: how long the tombstone holds the amount (ms; the reservations' TTL)

  Returns {code, amount}
  { 1, what went back to the balance (0 after a trim with nothing to give, and after a reap that
       holds; below 0 when the excess of requests that cost more than the slice was debited) }
  {-6, 0} no such slice (already returned, or reaped and its hold given back)
  {-9, 0} reap, expire: the deadline was renewed; nothing changed
]]
local mode = ARGV[1]

-- Gives back what the tombstone holds.
local function releaseHold()
  local held = redis.call('HMGET', KEYS[4], 'amount', 'holding')
  if held[2] ~= '1' then return {-6, 0} end
  if ARGV[4] ~= '' and tonumber(redis.call('ZSCORE', KEYS[3], ARGV[5]) or '0') > tonumber(ARGV[4]) then return {-9, 0} end
  local give = tonumber(held[1])
  if give ~= 0 then redis.call('INCRBY', KEYS[2], give) end
  -- Past the balance nothing may fail, or the retry would give the amount back twice.
  redis.pcall('HSET', KEYS[4], 'amount', 0, 'holding', 0)
  redis.pcall('ZREM', KEYS[3], ARGV[5])
  return {1, give}
end

if mode == 'expire' then return releaseHold() end
local amount = redis.call('HGET', KEYS[1], 'amount')
if not amount then
  if mode == 'return' then return releaseHold() end
  return {-6, 0}
end
amount = tonumber(amount)
if mode == 'trim' then
  local give = amount - tonumber(ARGV[2])
  if give <= 0 then return {1, 0} end
  -- The balance first: one that refuses the amount (a key of the wrong type) fails the call before
  -- the slice gave anything up, so that nothing held goes missing and the retry gives it back.
  redis.call('INCRBY', KEYS[2], give)
  redis.call('HINCRBY', KEYS[1], 'amount', -give)
  return {1, give}
end
if mode == 'reap' then
  if tonumber(redis.call('ZSCORE', KEYS[3], ARGV[3]) or '0') > tonumber(ARGV[4]) then return {-9, 0} end
  local holdMs = tonumber(ARGV[6])
  local back = 0
  if amount > 0 then
    -- The hold's deadline first, as in takeCreditSlice-3.lua: a hold the reaper cannot see is never held.
    redis.call('ZADD', KEYS[3], tonumber(ARGV[4]) + holdMs, ARGV[5])
  else
    -- Its requests cost more than the slice: the excess is debited now, nothing is held.
    if amount ~= 0 then redis.call('INCRBY', KEYS[2], amount) end
    back = amount
  end
  redis.pcall('ZREM', KEYS[3], ARGV[3])
  redis.call('HSET', KEYS[1], 'amount', math.max(amount, 0), 'holding', amount > 0 and 1 or 0)
  redis.call('RENAME', KEYS[1], KEYS[4])
  -- Outlives its hold, so that a settlement replayed after it still finds its records.
  redis.call('EXPIRE', KEYS[4], 86400 + math.ceil(holdMs / 1000))
  return {1, back}
end
if amount ~= 0 then redis.call('INCRBY', KEYS[2], amount) end
redis.pcall('ZREM', KEYS[3], ARGV[3])
redis.call('DEL', KEYS[1])
return {1, amount}
