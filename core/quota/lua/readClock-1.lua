--[[
  Reads the Redis server's clock (core/quota/redis-clock.ts): the one reference clock the relays'
  reservation and credit-slice deadlines and the billing worker's reaper are dated with, whatever
  their hosts' clocks say. A script, not a bare TIME, so that on a Redis Cluster it is routed by its
  key: every relay and worker asks the same node.

  KEYS[1] the clock key (never read or written: it only names the node that answers)

  Returns { seconds, microseconds } of the server's clock, as TIME does.
]]
return redis.call('TIME')
