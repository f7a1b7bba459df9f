--[[
  Settles reservations, one or many in a call (a relay sends those of a few milliseconds together,
  one call per shard): for each, gives back what was reserved, debits the actual cost, counts the
  tokens against the per-minute token budgets (the key's, its group's for the account), and appends
  the usage event to the billing stream, atomically, so that a debit in Redis always has its event and the other way round. A second
  call for the same reservation changes nothing. Each settlement is independent of the others in the
  call: one already settled does not stop the next.

  A reservation the reaper already released (its deadline passed: the relay seemed dead) left a
  tombstone; a settlement that arrives after that still debits the actual cost, from the balance the
  reaper restored, so a very long request is billed exactly, never twice and never for free.

  KEYS, 9 per settlement (settlement i uses KEYS[9*(i-1)+1 .. 9*i]):
   1 account balance
   2 key remaining quota (touched only if the key is limited)
   3 reservation
   4 usage stream (the call's events go to it as one entry, their JSON texts joined by newlines)
   5 key's tokens of the last minute (hash: 10-second bucket -> tokens; reserveQuota-8.lua): in the
     bucket the reservation counted its tokens in, they are replaced by the tokens used; a bucket
     already out of the window is left out
   6 open reservations by deadline (sorted set)
   7 tombstone of a reaped reservation (an older relay also left its settled marker 'S' here)
   8 the account's settled reservations (sorted set: member ARGV 4, score the Unix ms until which
     it is kept), written with ARGV 8 > 0 only
   9 the account's tokens of the last minute in the request's group (reserveQuota-8.lua KEYS 8),
     corrected as KEYS 5 is when the reservation held its tokens there

  ARGV, 9 per settlement ('' where absent):
   1 actual cost (integer >= 0; 0 refunds the whole reservation)
   2 usage event (JSON, core/usage/usage-event.ts)
   3 tokens used (input + output), counted when the reservation held tokens in KEYS 5
   4 reservation member of KEYS 6
   5 '1' if this is the reaper releasing the reservation (leaves the tombstone), else '0'
   6 the reaper's now (Unix ms; reaper only, '' otherwise): a deadline a live relay renewed past it
     since the reaper read the deadline set is not released
   7 relay only, with replicas: '1' if the key is limited, for a lost reservation
   8 relay only, with replicas: seconds a settled reservation stays in KEYS 8; 0 or '': not kept
   9 relay only, with replicas: Unix ms before which a missing reservation with neither marker nor
     tombstone was lost, not settled; '': never taken for lost

  A Redis failover loses the writes its master had not yet sent to the replica (replication is
  asynchronous): a reservation can vanish before its settlement arrives, or a settlement vanish and be
  replayed from the relay's spool. With the marker, "already settled" (in KEYS 8) and "reaped"
  (tombstone) are told from "lost" (neither): a lost reservation's settlement debits the cost alone,
  as the lost reservation's hold went with it, and emits its event, once (it leaves the marker). The
  marker outlives any replay the relay can send before ARGV 9, so a settlement that did run is never
  taken for a lost one.

  The markers are one sorted set per account rather than a key each: a busy account settles
  thousands of requests in a marker's life, and a Redis Cluster reshard moves a slot key by key,
  refusing (TRYAGAIN) every script whose keys are split between the two nodes meanwhile. Each write
  trims what has run out, and the set expires with its newest member.

  Returns an array, one element per settlement, in order:
   the stream entry id on success (the entry holds the other events of the call too)
  -1  a lost reservation's account mirror is not loaded (seed it, then send the settlement again)
  -2  a lost reservation's limited key mirror is not loaded (likewise)
  -6  no such reservation (already settled, or never made)
  -9  reaper only: the deadline was renewed (its relay is alive); nothing changed
]]
local now
local function nowMs()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- A key's remaining quota and its token counter are limits, not money: one of the wrong type is
-- logged and skipped, so that it does not hold back the account's debit, which Postgres settles anyway.
local function addToLimit(key, by)
  local reply = redis.pcall('INCRBY', key, by)
  if type(reply) == 'table' and reply.err then
    redis.log(redis.LOG_WARNING, 'settleReservations: limit ' .. key .. ' not moved: ' .. reply.err)
    return false
  end
  return true
end

-- A bucket the window has dropped, or a window that has expired, is not written again: the field
-- would count for nothing, and a hash written after its expiry would live for ever.
-- Nor is a bucket taken below zero (its hold gone with a bucket dropped and written anew), which would
-- let that many more in.
local function addToWindow(key, bucket, by)
  local reply = redis.pcall('HEXISTS', key, bucket)
  if reply == 1 then reply = redis.pcall('HINCRBY', key, bucket, by) end
  if type(reply) == 'table' and reply.err then
    redis.log(redis.LOG_WARNING, 'settleReservations: limit ' .. key .. ' not moved: ' .. reply.err)
  elseif by < 0 and reply < 0 then
    redis.call('HSET', key, bucket, 0)
  end
end

-- Marks a reservation settled until `untilMs`, dropping the marks that ran out; the set lives as
-- long as its newest mark.
local function keepSettled(set, member, untilMs)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', nowMs())
  redis.call('ZADD', set, untilMs, member)
  local ttl = redis.call('PTTL', set)
  if ttl < untilMs - nowMs() then redis.call('PEXPIREAT', set, untilMs) end
end

local function settleOne(k, a)
  local cost = tonumber(ARGV[a + 1])
  local markerSec = tonumber(ARGV[a + 8]) or 0
  local reaper = ARGV[a + 5] == '1'
  local reservation = redis.call('HMGET', KEYS[k + 3], 'amount', 'limited', 'tpm_key', 'tpm_tokens', 'tpm_bucket', 'group_tpm_key')
  local amount, limited
  local live = reservation[1] ~= false
  -- The tokens the reservation held, the bucket they are in (false: none held), and whether in KEYS 5
  -- and in KEYS 9 (a reservation names the windows it took them in; a settlement naming others
  -- corrects none).
  local heldTokens, heldBucket, inKeyWindow, inGroupWindow = 0, false, false, false
  if live and reservation[5] then
    inKeyWindow = reservation[3] == KEYS[k + 5]
    inGroupWindow = reservation[6] == KEYS[k + 9]
    if inKeyWindow or inGroupWindow then
      heldTokens = tonumber(reservation[4]) or 0
      heldBucket = reservation[5]
    end
  end
  if live then
    local reaperNow = tonumber(ARGV[a + 6])
    if reaper and reaperNow and tonumber(redis.call('ZSCORE', KEYS[k + 6], ARGV[a + 4]) or '0') > reaperNow then return -9 end
    amount = tonumber(reservation[1])
    limited = reservation[2]
  else
    if reaper then return -6 end
    if markerSec > 0 and redis.call('ZSCORE', KEYS[k + 8], ARGV[a + 4]) then return -6 end
    limited = redis.call('GET', KEYS[k + 7])
    if limited == 'S' then
      -- An older relay's marker: copied to the set, where the relay's replication check looks.
      if markerSec > 0 then
        local ttl = redis.call('PTTL', KEYS[k + 7])
        if ttl > 0 then keepSettled(KEYS[k + 8], ARGV[a + 4], nowMs() + ttl) end
      end
      return -6
    end
    if not limited then
      -- Neither settled nor reaped here: lost in a failover, if the relay says it may be.
      local lostUntil = tonumber(ARGV[a + 9])
      if markerSec <= 0 or not lostUntil then return -6 end
      if nowMs() >= lostUntil then return -6 end
      limited = ARGV[a + 7]
      -- The failover may have lost the mirrors too (an account's first request seeds them in the same
      -- window): a debit on a missing one would make it -cost, short of Postgres for good. The caller
      -- loads it from Postgres, which does not hold this event yet, and sends the settlement again.
      if redis.call('EXISTS', KEYS[k + 1]) == 0 then return -1 end
      if limited == '1' and redis.call('EXISTS', KEYS[k + 2]) == 0 then return -2 end
    end
    -- Late settlement after the reaper refunded everything, or a lost reservation: the cost alone.
    amount = 0
  end

  -- The debit comes before the reservation (or its tombstone) goes: a balance that refuses it (a key
  -- of the wrong type) fails the call with this settlement unchanged, so that its retry still finds
  -- the reservation and bills it, instead of answering "already settled" for a debit never made.
  local delta = amount - cost
  if delta ~= 0 then
    redis.call('INCRBY', KEYS[k + 1], delta)
    if limited == '1' then addToLimit(KEYS[k + 2], delta) end
  end

  if live then
    redis.call('DEL', KEYS[k + 3])
    redis.pcall('ZREM', KEYS[k + 6], ARGV[a + 4])
  end
  -- The reaper (always on a live reservation) leaves the tombstone; a settlement takes the tombstone
  -- it settled against away, and with replicas leaves its marker.
  if reaper then redis.call('SET', KEYS[k + 7], limited, 'EX', 86400)
  else
    if not live then redis.call('DEL', KEYS[k + 7]) end
    if markerSec > 0 then keepSettled(KEYS[k + 8], ARGV[a + 4], nowMs() + markerSec * 1000) end
  end

  if heldBucket then
    local tokens = (tonumber(ARGV[a + 3]) or 0) - heldTokens
    if tokens ~= 0 then
      if inKeyWindow then addToWindow(KEYS[k + 5], heldBucket, tokens) end
      if inGroupWindow then addToWindow(KEYS[k + 9], heldBucket, tokens) end
    end
  end
  return 1
end

-- The events of a call go out as one stream entry per stream (settleSliceDraws-4n.lua says why), after
-- the settlements. A command that fails inside a script does not undo the writes before it, so a
-- settlement that fails (a key of the wrong type) still lets those before it go out with their events,
-- as when each appended its own: a debit in Redis never goes without its event.
local results = {}
local streams = {}
local events = {}
local settledIn = {}

local function settleAll()
  for i = 0, #KEYS / 9 - 1 do
    local result = settleOne(i * 9, i * 9)
    if result == 1 then
      local stream = KEYS[i * 9 + 4]
      local list = events[stream]
      if not list then
        list = {}
        events[stream] = list
        settledIn[stream] = {}
        streams[#streams + 1] = stream
      end
      list[#list + 1] = ARGV[i * 9 + 2]
      table.insert(settledIn[stream], i + 1)
    end
    results[i + 1] = result
  end
end

local ok, err = pcall(settleAll)
for _, stream in ipairs(streams) do
  local id = redis.call('XADD', stream, '*', 'e', table.concat(events[stream], '\n'))
  for _, at in ipairs(settledIn[stream]) do results[at] = id end
end
if not ok then return redis.error_reply(type(err) == 'table' and err.err or tostring(err)) end
return results
