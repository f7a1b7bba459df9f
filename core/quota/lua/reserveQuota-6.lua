--[[
  Checks a key's rate limits and reserves an estimated cost against the account balance and, for a
  limited key, the key's remaining quota, and records the reservation: one round trip, all or
  nothing. On any failure nothing changes.

  KEYS[1] account balance          (integer string)
  KEYS[2] key remaining quota      (integer string; read only when ARGV[2] == '1')
  KEYS[3] reservation              (hash, must not exist)
  KEYS[4] key's requests of the last minute (hash: 10-second bucket number -> requests taken in it)
  KEYS[5] key's token counter of the current minute (this reservation's tokens are added when the
          key has a tokens-per-minute limit; settleReservations-7n.lua turns them into the actual ones)
  KEYS[6] open reservations by deadline (sorted set)

  ARGV[1] amount to reserve        (integer >= 0)
  ARGV[2] '1' if the key is limited, else '0'
  ARGV[3] reservation deadline     (Unix ms; after it a reaper may release the reservation)
  ARGV[4] token id
  ARGV[5] requests per minute allowed (0 = no limit)
  ARGV[6] tokens per minute allowed (0 = no limit)
  ARGV[7] user id
  ARGV[8] reservation member of KEYS[6] (`<user id>:<request id>`)
  ARGV[9] tokens the request may use (its input bound + output bound; '' or 0: none counted)
  ARGV[10] now (Unix ms; the caller's clock, which also names the minute of KEYS[5])

  Returns
   1  reserved; also when the reservation under this request id is this very call's, repeated (a
      client library resends a command whose connection dropped before the answer, as ioredis does)
  -1  account balance not loaded (caller seeds it from Postgres and retries)
  -2  key quota not loaded (same)
  -3  account balance below the amount
  -4  key quota below the amount
  -5  another reservation with this request id exists
  {-7, ms}  requests-per-minute limit reached; ms: how long until a request would be let in, if no
      other is taken meanwhile
  -8  tokens-per-minute limit reached
]]
local amount = tonumber(ARGV[1])
local limited = ARGV[2] == '1'
local rpm = tonumber(ARGV[5])
local tpm = tonumber(ARGV[6])

-- First: a resent call finds its own reservation, and the limits, the balance and the key's quota it
-- already took refused it. Answered -5, the request failed while its hold stayed until the reaper's
-- deadline. Its own: the same amount, key, account and deadline (ms) as this call's.
if redis.call('EXISTS', KEYS[3]) == 1 then
  local held = redis.call('HMGET', KEYS[3], 'amount', 'token', 'user', 'deadline')
  if held[1] == ARGV[1] and held[2] == ARGV[4] and held[3] == ARGV[7] and held[4] == ARGV[3] then return 1 end
  return -5
end

-- Requests per minute over a sliding window: whatever the clock's minute, no 60 s hold more than the
-- limit (a per-minute counter let a burst at a minute's end and another at the next one's start pass
-- twice the limit). Counted in 10-second buckets, a bucket until all of it is older than 60 s: exact
-- as a limit, and a refused client waits at most 10 s more than a log of every request would make it,
-- for a record of at most 7 numbers per key whatever the limit.
local BUCKET_MS = 10000
local now = tonumber(ARGV[10])
local bucket, first, taken, stale
if rpm > 0 then
  bucket = math.floor(now / BUCKET_MS)
  first = bucket - 6
  taken = 0
  local counts = {}
  local fields = redis.call('HGETALL', KEYS[4])
  for i = 1, #fields, 2 do
    local b = tonumber(fields[i])
    if b == nil or b < first then
      stale = stale or {}
      stale[#stale + 1] = fields[i]
    else
      local n = tonumber(fields[i + 1]) or 0
      counts[#counts + 1] = {b, n}
      taken = taken + n
    end
  end
  if taken >= rpm then
    -- Oldest first: the request is let in when enough of them have left the window for one more.
    table.sort(counts, function(x, y) return x[1] < y[1] end)
    local left = taken
    for _, c in ipairs(counts) do
      left = left - c[2]
      if left < rpm then return {-7, (c[1] + 1) * BUCKET_MS + 60000 - now} end
    end
    return {-7, BUCKET_MS}
  end
end
if tpm > 0 and tonumber(redis.call('GET', KEYS[5]) or '0') >= tpm then return -8 end

local balance = redis.call('GET', KEYS[1])
if not balance then return -1 end
local remain
if limited then
  remain = redis.call('GET', KEYS[2])
  if not remain then return -2 end
end
if tonumber(balance) < amount then return -3 end
if limited and tonumber(remain) < amount then return -4 end

-- The deadline first: a set that refuses it (a key of the wrong type) fails the call before anything
-- is held, as a hold the reaper cannot see would never come back if its relay died.
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[8])
redis.call('DECRBY', KEYS[1], amount)
if limited then redis.call('DECRBY', KEYS[2], amount) end
redis.call('HSET', KEYS[3], 'amount', amount, 'limited', ARGV[2], 'token', ARGV[4], 'user', ARGV[7], 'deadline', ARGV[3])
-- A tokens-per-minute limit counts the requests in flight, not only those settled: otherwise any
-- number of requests sent at once passed a counter that settlement had not moved yet. Which counter
-- took them is kept, for the settlement to correct that one only.
local tokens = tonumber(ARGV[9]) or 0
if tpm > 0 and tokens > 0 then
  redis.call('INCRBY', KEYS[5], tokens)
  redis.call('EXPIRE', KEYS[5], 120)
  redis.call('HSET', KEYS[3], 'tpm_key', KEYS[5], 'tpm_tokens', tokens)
end
if rpm > 0 then
  if stale then redis.call('HDEL', KEYS[4], unpack(stale)) end
  redis.call('HINCRBY', KEYS[4], bucket, 1)
  -- Lives as long as its newest bucket counts.
  redis.call('PEXPIRE', KEYS[4], (bucket + 1) * BUCKET_MS + 60000 - now)
end
return 1
