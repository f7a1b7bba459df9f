--[[
  Applies a change made outside the relay (top-up, admin quota change) to the Redis mirror of a
  balance or of a key's remaining quota, only if the mirror is loaded: an unloaded mirror is seeded
  from Postgres later, and Postgres already holds the change.

  KEYS[1] account balance or key remaining quota

  ARGV[1] delta (integer, may be negative)

  Returns {1, new value} when loaded, {0} when not.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
return {1, redis.call('INCRBY', KEYS[1], ARGV[1])}
