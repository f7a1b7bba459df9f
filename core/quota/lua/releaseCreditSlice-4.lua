--[[
  Gives back what a relay's slice of an account's balance (takeCreditSlice-3.lua) still holds, in
  one of three ways:
   'trim'   the relay reserves no more from the slice but some of its requests are still running:
            the slice keeps ARGV[2] (what those requests reserved) and the rest goes back now;
   'return' every request of the slice is settled: the rest goes back (less than zero when the
            requests cost more than the slice: the excess is debited) and the slice is removed;
   'reap'   the reaper, for a slice whose deadline passed (its relay seemed dead): as 'return', but
            the slice becomes its tombstone, keeping the records of the requests it settled, so that a
            late settlement (settleSliceDraws-4n.lua) debits the balance once. Unless the relay
            renewed the deadline past ARGV[4] meanwhile.

  KEYS[1] the slice                (hash)
  KEYS[2] account balance
  KEYS[3] open reservations by deadline (sorted set)
  KEYS[4] the slice's tombstone

  ARGV[1] 'trim', 'return' or 'reap'
  ARGV[2] trim: the amount the slice keeps
  ARGV[3] member of KEYS[3]
  ARGV[4] reap: the reaper's now (Unix ms)

  Returns {code, amount}
  { 1, what went back to the balance (0 after a trim with nothing to give; below 0 when the excess
       of requests that cost more than the slice was debited) }
  {-6, 0} no such slice (already returned or reaped)
  {-9, 0} reap: the deadline was renewed; nothing changed
]]
local amount = redis.call('HGET', KEYS[1], 'amount')
if not amount then return {-6, 0} end
amount = tonumber(amount)
local mode = ARGV[1]
if mode == 'trim' then
  local give = amount - tonumber(ARGV[2])
  if give <= 0 then return {1, 0} end
  -- The balance first: one that refuses the amount (a key of the wrong type) fails the call before
  -- the slice gave anything up, so that nothing held goes missing and the retry gives it back.
  redis.call('INCRBY', KEYS[2], give)
  redis.call('HINCRBY', KEYS[1], 'amount', -give)
  return {1, give}
end
if mode == 'reap' and tonumber(redis.call('ZSCORE', KEYS[3], ARGV[3]) or '0') > tonumber(ARGV[4]) then return {-9, 0} end
if amount ~= 0 then redis.call('INCRBY', KEYS[2], amount) end
-- Past the balance nothing may fail, or the retry would give the amount back twice: a deadline set of
-- the wrong type costs the reaper this member, not the account its money.
redis.pcall('ZREM', KEYS[3], ARGV[3])
if mode == 'reap' then
  redis.call('HSET', KEYS[1], 'amount', 0)
  redis.call('RENAME', KEYS[1], KEYS[4])
  redis.call('EXPIRE', KEYS[4], 86400)
else
  redis.call('DEL', KEYS[1])
end
return {1, amount}
