--[[
  Takes a slice of an account's balance for one relay (credit held by the relay,
  core/quota/credit-slices.ts): the relay then reserves its requests from the slice in memory, with no
  round trip each, and settles them against it (settleSliceDraws-4n.lua). The slice is a reservation
  like any other (a hash, in the deadline set, renewed by the relay's heartbeat, released by the reaper
  when the relay dies), marked `slice`. A slice is only granted from a balance at least `ARGV[2]`, so
  that one relay never holds a large share of an account near its end: the caller reserves per request
  then.

  KEYS[1] account balance          (integer string)
  KEYS[2] the slice                (hash, must not exist)
  KEYS[3] open reservations by deadline (sorted set)

  ARGV[1] amount of the slice      (integer > 0)
  ARGV[2] least balance from which a slice is granted (integer >= ARGV[1])
  ARGV[3] deadline                 (Unix ms; after it a reaper may release the slice)
  ARGV[4] user id
  ARGV[5] member of KEYS[3] (`<user id>:<slice id>`)

  Returns
   1  taken
  -1  account balance not loaded (caller seeds it from Postgres and retries)
  -3  balance below ARGV[2]: no slice (the caller reserves the request alone)
  -5  a reservation with this id exists
]]
local balance = redis.call('GET', KEYS[1])
if not balance then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return -5 end
if tonumber(balance) < tonumber(ARGV[2]) then return -3 end
-- The deadline first, as in reserveQuota-8.lua: a slice the reaper cannot see is never held.
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[5])
redis.call('DECRBY', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'amount', ARGV[1], 'limited', '0', 'token', 0, 'user', ARGV[4], 'deadline', ARGV[3], 'slice', '1')
return 1
