--[[
  Checks a key's rate limits and reserves an estimated cost against the account balance and, for a
  limited key, the key's remaining quota, and records the reservation: one round trip, all or
  nothing. On any failure nothing changes.

  KEYS[1] account balance          (integer string)
  KEYS[2] key remaining quota      (integer string; read only when ARGV[2] == '1')
  KEYS[3] reservation              (hash, must not exist)
  KEYS[4] key's request counter of the current minute
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

  Returns
   1  reserved; also when the reservation under this request id is this very call's, repeated (a
      client library resends a command whose connection dropped before the answer, as ioredis does)
  -1  account balance not loaded (caller seeds it from Postgres and retries)
  -2  key quota not loaded (same)
  -3  account balance below the amount
  -4  key quota below the amount
  -5  another reservation with this request id exists
  -7  requests-per-minute limit reached
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

if rpm > 0 and tonumber(redis.call('GET', KEYS[4]) or '0') >= rpm then return -7 end
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
  redis.call('INCR', KEYS[4])
  redis.call('EXPIRE', KEYS[4], 120)
end
return 1
