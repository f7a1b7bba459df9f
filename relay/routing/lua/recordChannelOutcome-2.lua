--[[
  Records what a channel's provider attempts came to, shared by every relay, and says whether the
  channel must now be disabled. Atomic, because two relays recording faults of one channel at once
  must not both read a count below the threshold.

  Two rules, either trips (only a call that adds a fault can trip; a success batch never does):
    consecutive: the faults since the channel's last success (any relay's) reach ARGV[7];
    rate:        over the last ARGV[9] ms, faults / attempts reach ARGV[8] with at least ARGV[10]
                 attempts.
  A relay records a fault as it happens (one call, on the failure path) and its successes in batches
  (one call per channel per flush, off the request path), carrying the time of its latest success:
  faults scored at or before the latest success anyone reported no longer count as consecutive.

  KEYS[1] the channel's faults since its last success (sorted set: member a unique id, score Unix ms)
  KEYS[2] the channel's outcomes (hash): `since` (the epoch below), `last_ok` (Unix ms of the latest
          success reported), `r<bucket>` attempts and `f<bucket>` faults of each window bucket

  ARGV[1]  now, Unix ms
  ARGV[2]  faults to add: 0 or 1
  ARGV[3]  successes to add (a batch, >= 0)
  ARGV[4]  Unix ms of the latest success in the batch (0: none)
  ARGV[5]  epoch, Unix ms: the channel's last status change. A newer epoch than the stored one clears
           both keys first, so a channel re-enabled by a probe or an administrator starts clean
  ARGV[6]  member of the fault (unique per fault: the request id)
  ARGV[7]  consecutive faults that disable (0: rule off)
  ARGV[8]  fault rate that disables, 0..1 (0: rule off)
  ARGV[9]  rate window, ms
  ARGV[10] fewest attempts in the window before the rate rule applies
  ARGV[11] bucket length, ms (the window is counted in whole buckets)

  Returns { verdict, consecutive faults, attempts in window, faults in window }, verdict 0 healthy,
  1 disable (consecutive), 2 disable (rate).
]]
local now = tonumber(ARGV[1])
local faults = tonumber(ARGV[2])
local successes = tonumber(ARGV[3])
local lastOk = tonumber(ARGV[4])
local epoch = tonumber(ARGV[5])
local consecutiveLimit = tonumber(ARGV[7])
local rateLimit = tonumber(ARGV[8])
local windowMs = tonumber(ARGV[9])
local minAttempts = tonumber(ARGV[10])
local bucketMs = tonumber(ARGV[11])

local since = tonumber(redis.call('HGET', KEYS[2], 'since') or '0')
if epoch > since then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[2], 'since', epoch)
end

local storedOk = tonumber(redis.call('HGET', KEYS[2], 'last_ok') or '0')
if lastOk > storedOk then
  redis.call('HSET', KEYS[2], 'last_ok', lastOk)
  storedOk = lastOk
end
-- Faults up to the latest success (or the epoch) are not consecutive any more.
local cut = math.max(storedOk, epoch)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cut)
if faults > 0 and now > cut then
  redis.call('ZADD', KEYS[1], now, ARGV[6])
end
-- Bounded: more than the threshold is never needed to decide (1000 when the rule is off).
local keep = consecutiveLimit > 0 and consecutiveLimit or 1000
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(keep + 1))
local consecutive = redis.call('ZCARD', KEYS[1])

local bucket = math.floor(now / bucketMs)
local buckets = math.max(1, math.ceil(windowMs / bucketMs))
if faults + successes > 0 then
  redis.call('HINCRBY', KEYS[2], 'r' .. bucket, faults + successes)
  if faults > 0 then redis.call('HINCRBY', KEYS[2], 'f' .. bucket, faults) end
  -- The bucket that just left the window. Traffic with gaps leaves older ones behind: swept when
  -- they outnumber the window, so the hash stays bounded.
  redis.call('HDEL', KEYS[2], 'r' .. (bucket - buckets), 'f' .. (bucket - buckets))
  if redis.call('HLEN', KEYS[2]) > 2 * buckets + 6 then
    for _, field in ipairs(redis.call('HKEYS', KEYS[2])) do
      local b = tonumber(string.sub(field, 2))
      local kind = string.sub(field, 1, 1)
      if (kind == 'r' or kind == 'f') and b and b <= bucket - buckets then redis.call('HDEL', KEYS[2], field) end
    end
  end
end
local attempts, windowFaults = 0, 0
for b = bucket - buckets + 1, bucket do
  attempts = attempts + tonumber(redis.call('HGET', KEYS[2], 'r' .. b) or '0')
  windowFaults = windowFaults + tonumber(redis.call('HGET', KEYS[2], 'f' .. b) or '0')
end
-- A channel nobody uses forgets its counts; a day outlives any window and backoff in use.
redis.call('PEXPIRE', KEYS[1], 86400000)
redis.call('PEXPIRE', KEYS[2], 86400000)

local verdict = 0
if faults > 0 then
  if consecutiveLimit > 0 and consecutive >= consecutiveLimit then
    verdict = 1
  elseif rateLimit > 0 and attempts >= minAttempts and windowFaults >= rateLimit * attempts then
    verdict = 2
  end
end
return { verdict, consecutive, attempts, windowFaults }
