--[[
  Settles a reservation: gives back what was reserved, debits the actual cost, counts the tokens
  against the key's per-minute token budget, and appends the usage event to the billing stream,
  atomically, so that a debit in Redis always has its event and the other way round. A second call
  for the same reservation changes nothing.

  KEYS[1] account balance
  KEYS[2] key remaining quota (touched only if the reservation says the key is limited)
  KEYS[3] reservation
  KEYS[4] usage stream
  KEYS[5] key's token counter of the current minute

  ARGV[1] actual cost (integer >= 0; 0 refunds the whole reservation)
  ARGV[2] usage event (JSON, billing/usage-event.ts)
  ARGV[3] tokens used (input + output), counted when > 0

  Returns
   the stream entry id on success
  -6  no such reservation (already settled or released)
]]
local reservation = redis.call('HMGET', KEYS[3], 'amount', 'limited')
if not reservation[1] then return -6 end

local delta = tonumber(reservation[1]) - tonumber(ARGV[1])
if delta ~= 0 then
  redis.call('INCRBY', KEYS[1], delta)
  if reservation[2] == '1' then redis.call('INCRBY', KEYS[2], delta) end
end
redis.call('DEL', KEYS[3])
local tokens = tonumber(ARGV[3])
if tokens > 0 then
  redis.call('INCRBY', KEYS[5], tokens)
  redis.call('EXPIRE', KEYS[5], 120)
end
return redis.call('XADD', KEYS[4], '*', 'e', ARGV[2])
