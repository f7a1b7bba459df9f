--[[
  Checks a request's rate limits (its key's own, and its group's for the account) and reserves an
  estimated cost against the account balance and, for a limited key, the key's remaining quota, and
  records the reservation: one round trip, all or nothing. On any failure nothing changes.

  KEYS[1] account balance          (integer string)
  KEYS[2] key remaining quota      (integer string; read only when ARGV[2] == '1')
  KEYS[3] reservation              (hash, must not exist)
  KEYS[4] key's requests of the last minute (hash: 10-second bucket number -> requests taken in it)
  KEYS[5] key's tokens of the last minute (hash as KEYS[4]: this reservation's tokens are added to
          the bucket of now when the key has a tokens-per-minute limit; settleReservations-9n.lua
          turns them into the tokens used, in that bucket)
  KEYS[6] open reservations by deadline (sorted set)
  KEYS[7] the account's requests of the last minute in the request's group (hash as KEYS[4]): the
          group's limit is the account's, all its keys of the group together
  KEYS[8] the account's tokens of the last minute in the request's group (hash as KEYS[5])

  ARGV[1] amount to reserve        (integer >= 0)
  ARGV[2] '1' if the key is limited, else '0'
  ARGV[3] reservation deadline     (Unix ms; after it a reaper may release the reservation)
  ARGV[4] token id
  ARGV[5] the key's own requests per minute (0 = no limit), counted in KEYS[4]
  ARGV[6] the key's own tokens per minute (0 = no limit), counted in KEYS[5]
  ARGV[7] user id
  ARGV[8] reservation member of KEYS[6] (`<user id>:<request id>`)
  ARGV[9] tokens the request may use (its input bound + output bound; '' or 0: none counted)
  ARGV[10] '' (the Redis server's clock places the request in the windows: one clock for every
          relay, whose own clocks may differ), or a Unix ms to use instead (tests)
  ARGV[11] the group's requests per minute for one account (0 = no limit), counted in KEYS[7]
  ARGV[12] the group's tokens per minute for one account (0 = no limit), counted in KEYS[8]

  Returns
   1  reserved; also when the reservation under this request id is this very call's, repeated (a
      client library resends a command whose connection dropped before the answer, as ioredis does)
  -1  account balance not loaded (caller seeds it from Postgres and retries)
  -2  key quota not loaded (same)
  -3  account balance below the amount
  -4  key quota below the amount
  -5  another reservation with this request id exists
  {-7, ms, scope}  a requests-per-minute limit reached; ms: how long until its window has room, if
      nothing more is taken meanwhile; scope 0: the key's own limit, 1: the group's for the account
  {-8, ms, scope}  a tokens-per-minute limit reached (ms and scope as for -7)
]]
local amount = tonumber(ARGV[1])
local limited = ARGV[2] == '1'
local rpm = tonumber(ARGV[5])
local tpm = tonumber(ARGV[6])
local groupRpm = tonumber(ARGV[11]) or 0
local groupTpm = tonumber(ARGV[12]) or 0

-- First: a resent call finds its own reservation, and the limits, the balance and the key's quota it
-- already took refused it. Answered -5, the request failed while its hold stayed until the reaper's
-- deadline. Its own: the same amount, key, account and deadline (ms) as this call's.
if redis.call('EXISTS', KEYS[3]) == 1 then
  local held = redis.call('HMGET', KEYS[3], 'amount', 'token', 'user', 'deadline')
  if held[1] == ARGV[1] and held[2] == ARGV[4] and held[3] == ARGV[7] and held[4] == ARGV[3] then return 1 end
  return -5
end

-- Requests and tokens per minute over a sliding window: whatever the clock's minute, a request is
-- refused once the last 60 s hold the limit (a per-minute counter let a burst at a minute's end and
-- another at the next one's start pass twice the limit); the request that reaches it runs whole, so
-- tokens can pass the limit by that one request's (its hold is a bound, far above most requests' use). Counted in 10-second buckets, a bucket until all of it is older
-- than 60 s: exact as a limit, and a refused client waits at most 10 s more than a log of every
-- request would make it, for a record of at most 7 numbers per key whatever the limit.
local BUCKET_MS = 10000
local now = tonumber(ARGV[10])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local bucket = math.floor(now / BUCKET_MS)
local first = bucket - 6

-- The window's total, its buckets, and its fields to drop on a write: older than the window, or not
-- a bucket of whole requests or tokens (HINCRBY would fail on it after the money moved). A bucket
-- ahead of now (a failover to a node whose clock is behind) counts as now's. A window that is not a
-- hash is dropped: it is a limit, not money, and under one name for good it would refuse the key for
-- ever.
local function readWindow(key)
  local taken, counts, stale = 0, {}, nil
  local fields = redis.pcall('HGETALL', key)
  if fields.err then
    redis.log(redis.LOG_WARNING, 'reserveQuota: window ' .. key .. ' dropped: ' .. fields.err)
    redis.call('DEL', key)
    return taken, counts, stale
  end
  for i = 1, #fields, 2 do
    local b = tonumber(fields[i])
    local n = tonumber(fields[i + 1])
    if b == nil or b < first or b % 1 ~= 0 or n == nil or n % 1 ~= 0 then
      stale = stale or {}
      stale[#stale + 1] = fields[i]
    else
      counts[#counts + 1] = {math.min(b, bucket), n}
      taken = taken + n
    end
  end
  return taken, counts, stale
end

-- Milliseconds until the window holds less than `limit`: oldest bucket first, each leaving when all
-- of it is older than 60 s.
local function roomAfter(counts, taken, limit)
  table.sort(counts, function(x, y) return x[1] < y[1] end)
  for _, c in ipairs(counts) do
    taken = taken - c[2]
    if taken < limit then return (c[1] + 1) * BUCKET_MS + 60000 - now end
  end
  return BUCKET_MS
end

local function addToWindow(key, stale, n)
  if stale then redis.call('HDEL', key, unpack(stale)) end
  redis.call('HINCRBY', key, bucket, n)
  -- Lives as long as its newest bucket counts (a caller whose clock is behind does not shorten it).
  local ttl = (bucket + 1) * BUCKET_MS + 60000 - now
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end

-- A window's fields to drop on a write, or its refusal ({code, ms, scope}) when it holds the limit.
local function checkWindow(key, limit, code, scope)
  local taken, counts, stale = readWindow(key)
  if taken >= limit then return nil, {code, roomAfter(counts, taken, limit), scope} end
  return stale, nil
end

-- Every window is read before anything is written: a request one limit refuses takes nothing from
-- the others. Each: its key, its limit, its refusal code and scope (no table built without a limit).
local stale
if rpm > 0 or tpm > 0 or groupRpm > 0 or groupTpm > 0 then
  stale = {}
  local windows = {{KEYS[4], rpm, -7, 0}, {KEYS[5], tpm, -8, 0}, {KEYS[7], groupRpm, -7, 1}, {KEYS[8], groupTpm, -8, 1}}
  for i, w in ipairs(windows) do
    if w[2] > 0 then
      local fields, refused = checkWindow(w[1], w[2], w[3], w[4])
      if refused then return refused end
      stale[i] = fields
    end
  end
end

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
-- number of requests sent at once passed a counter that settlement had not moved yet. Which windows and
-- bucket took them is kept, for the settlement to correct that bucket only.
local tokens = tonumber(ARGV[9]) or 0
if tokens > 0 then
  if tpm > 0 then
    addToWindow(KEYS[5], stale[2], tokens)
    redis.call('HSET', KEYS[3], 'tpm_key', KEYS[5])
  end
  if groupTpm > 0 then
    addToWindow(KEYS[8], stale[4], tokens)
    redis.call('HSET', KEYS[3], 'group_tpm_key', KEYS[8])
  end
  if tpm > 0 or groupTpm > 0 then redis.call('HSET', KEYS[3], 'tpm_tokens', tokens, 'tpm_bucket', bucket) end
end
if rpm > 0 then addToWindow(KEYS[4], stale[1], 1) end
if groupRpm > 0 then addToWindow(KEYS[7], stale[3], 1) end
return 1
