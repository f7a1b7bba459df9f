--[[
  Settles requests a relay reserved from its slice of an account's balance (takeCreditSlice-3.lua), one
  or many in a call (with the relay's other settlements of a few milliseconds, one call per shard): for
  each, debits the actual cost from the slice and appends the usage event to the billing stream,
  atomically. The slice records each request it settled (a field named by the request's number in
  the slice: short, so the record stays cheap to look up), so a second call for the same request (a
  retry after a lost answer, a replay from the relay's spool) changes nothing.

  A slice the reaper released (its relay seemed dead) was renamed to its tombstone with those records:
  a settlement that arrives after that debits the balance the reaper restored instead, once. A request
  whose slice has neither hash nor tombstone was settled before its slice was returned (a relay returns
  a slice only once all its requests' settlements were taken): nothing changes.

  KEYS, 4 per settlement (settlement i uses KEYS[4*(i-1)+1 .. 4*i]):
   1 account balance
   2 the slice (hash)
   3 the slice's tombstone (hash, left by the reaper)
   4 usage stream

  ARGV, 3 per settlement:
   1 actual cost (integer >= 0)
   2 usage event (JSON, core/usage/usage-event.ts)
   3 the request's number in the slice (1, 2, ...)

  Returns an array, one element per settlement, in order:
   1  settled against the slice
   2  settled against the balance (the slice was reaped: the relay must stop reserving from it)
  -6  already settled
]]
local results = {}
for i = 0, #KEYS / 4 - 1 do
  local k = i * 4
  local a = i * 3
  local cost = tonumber(ARGV[a + 1])
  local done = ARGV[a + 3]
  local result
  if redis.call('EXISTS', KEYS[k + 2]) == 1 then
    if redis.call('HSETNX', KEYS[k + 2], done, 1) == 0 then
      result = -6
    else
      if cost ~= 0 then redis.call('HINCRBY', KEYS[k + 2], 'amount', -cost) end
      result = 1
    end
  elseif redis.call('EXISTS', KEYS[k + 3]) == 1 and redis.call('HSETNX', KEYS[k + 3], done, 1) == 1 then
    if cost ~= 0 then redis.call('DECRBY', KEYS[k + 1], cost) end
    result = 2
  else
    result = -6
  end
  if result > 0 then redis.call('XADD', KEYS[k + 4], '*', 'e', ARGV[a + 2]) end
  results[i + 1] = result
end
return results
