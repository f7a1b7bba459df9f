#!lua flags=allow-oom
--[[
  One read of a usage stream by the billing worker, with the id of the Redis data it read from
  (billing/billing-worker.ts #readIn; mirror-repair.ts says what the id is for): the id is created
  when missing (SET NX, a new random id from the caller) and returned with the read, atomically, so
  the entries read are known to have been debited in that data even when Redis restarts around it.

  allow-oom: this runs when Redis is at maxmemory (noeviction) too. Billing is what frees its memory
  (settled entries are deleted), so its reads must not be refused then; the only write that can take
  memory is the id, once per Redis data (a few dozen bytes), plus the read's pending-entry records.

  KEYS[1] the usage stream
  KEYS[2] the Redis data's id (keys.redisIncarnation(shard))

  ARGV[1] a new random id, set when KEYS[2] is missing
  ARGV[2] consumer group
  ARGV[3] consumer name
  ARGV[4] COUNT: entries at most
  ARGV[5] 'read': XREADGROUP from ARGV[6] ('0': this consumer's pending entries, '>': new ones),
          'claim': XAUTOCLAIM of entries idle at least ARGV[6] ms, from the start
  ARGV[6] see ARGV[5]
  ARGV[7] the data's id the caller last read from ('' when none yet): another id (or none) means this
          is not the data the caller checked was its own (a Redis swapped under it, or restarted
          empty; ioredis sends a read its dropped connection left unanswered again after the
          reconnect, to whatever server answers): nothing is read

  Returns {id, reply}: the data's id, and XREADGROUP's reply (one {stream, entries} pair, or nil when none)
  or XAUTOCLAIM's ([next id, entries, deleted ids]); {id, nil, 1} when ARGV[7] named other data.
  Errors as those commands do (NOGROUP when the group is gone).
]]
local before = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], ARGV[1], 'NX')
local id = redis.call('GET', KEYS[2])
if ARGV[7] ~= nil and ARGV[7] ~= '' and before ~= ARGV[7] then return {id, false, 1} end
local reply
if ARGV[5] == 'claim' then
  reply = redis.call('XAUTOCLAIM', KEYS[1], ARGV[2], ARGV[3], ARGV[6], '0-0', 'COUNT', ARGV[4])
else
  reply = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[1], ARGV[6])
end
return {id, reply}
