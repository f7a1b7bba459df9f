--[[
  Takes, renews or gives up a billing worker's hold on one shard's usage stream (sharded layout,
  billing/shard-leases.ts): at most one worker consumes a shard at a time, and a worker that died
  loses its hold when the lease runs out.

  KEYS[1] the shard's lease (string: the holder's name, with a TTL)

  ARGV[1] the worker's name (its consumer name in the billing group)
  ARGV[2] lease length in ms
  ARGV[3] 'hold' to take or renew, 'release' to give it up

  Returns 1 when the worker holds the lease now ('hold') or gave it up ('release'), 0 when another
  worker holds it (nothing changed).
]]
local holder = redis.call('GET', KEYS[1])
if ARGV[3] == 'release' then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
