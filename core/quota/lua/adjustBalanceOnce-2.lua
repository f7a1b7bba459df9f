--[[
  Applies a console-side change (identified by its ledger id) to the Redis mirror of an account
  balance at most once, however often it is retried: the console after its commit, and the billing
  worker's follow-up if the console failed, may both try.

  KEYS[1] account balance
  KEYS[2] marker of this change having been applied

  ARGV[1] delta (integer, may be negative)
  ARGV[2] marker lifetime in seconds

  Returns {2} when already applied, {1, new value} when applied to a loaded mirror, {0} when the mirror
  is not loaded (it will be seeded from Postgres, which holds the change; the marker is set anyway).
]]
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) == false then return {2} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
return {1, redis.call('INCRBY', KEYS[1], ARGV[1])}
