--[[
  Settles requests a relay reserved from its slice of an account's balance (takeCreditSlice-3.lua), one
  or many in a call (with the relay's other settlements of a few milliseconds, one call per shard): for
  each, debits the actual cost from the slice and appends the usage event to the billing stream,
  atomically. The slice records each request it settled, so a second call for the same request (a
  retry after a lost answer, a replay from the relay's spool) changes nothing.

  The records are bits: request n is bit (n-1) % 30 of field `d<(n-1) // 30>`, so a slice of
  thousands of requests keeps a few dozen short fields. One field per request (field `n`, what relays
  before this script wrote, still honoured here) made the hash a listpack of up to 512 entries
  (hash-max-listpack-entries) that every record scanned whole: 2.9 µs of Redis per request against the
  slice's whole settlement cost of ~11 µs. 30 bits keep the field's decimal text exact (redis.call
  writes a Lua number as the shortest text that reads back the same, and 2^30 is far from the 2^53
  where doubles stop being exact).

  The events of a call go to the stream as one entry per stream (in practice one: a call is one
  shard's), their JSON texts joined by newlines (JSON.stringify never writes a raw newline): an entry
  and its id cost Redis about as much as the event's bytes, and the billing worker reads, acknowledges
  and deletes per entry (billing/billing-worker.ts splits them again).

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
local RECORD_BITS = 30

-- Records request n in the slice or tombstone `key`: nil when the hash does not exist, false when it
-- has the record already, else true, with the cost debited from the slice's amount in the same write
-- when `debit`.
local function record(key, n, cost, debit)
  local field = 'd' .. math.floor((n - 1) / RECORD_BITS)
  local bit = 2 ^ ((n - 1) % RECORD_BITS)
  -- `amount` tells whether the hash exists (a tombstone keeps it at 0); the request's own field is
  -- the record of a relay from before the bits.
  local got = redis.call('HMGET', key, 'amount', field, n)
  if not got[1] then return nil end
  if got[3] then return false end
  local bits = tonumber(got[2]) or 0
  if math.floor(bits / bit) % 2 == 1 then return false end
  if debit and cost ~= 0 then
    redis.call('HSET', key, field, bits + bit, 'amount', tonumber(got[1]) - cost)
  else
    redis.call('HSET', key, field, bits + bit)
  end
  return true
end

local results = {}
local streams = {}
local events = {}

-- A command that fails inside a script does not undo the writes before it: the settlements before a
-- failing one (a key of the wrong type) still go out with their events, as when each appended its
-- own, so a debit in Redis never goes without its event.
local function settleAll()
  for i = 0, #KEYS / 4 - 1 do
    local k = i * 4
    local a = i * 3
    local cost = tonumber(ARGV[a + 1])
    local n = tonumber(ARGV[a + 3])
    local result = -6
    local recorded = record(KEYS[k + 2], n, cost, true)
    if recorded then
      result = 1
    elseif recorded == nil and record(KEYS[k + 3], n, cost, false) then
      if cost ~= 0 then redis.call('DECRBY', KEYS[k + 1], cost) end
      result = 2
    end
    if result > 0 then
      local stream = KEYS[k + 4]
      local list = events[stream]
      if not list then
        list = {}
        events[stream] = list
        streams[#streams + 1] = stream
      end
      list[#list + 1] = ARGV[a + 2]
    end
    results[i + 1] = result
  end
end

local ok, err = pcall(settleAll)
for _, stream in ipairs(streams) do
  redis.call('XADD', stream, '*', 'e', table.concat(events[stream], '\n'))
end
if not ok then return redis.error_reply(type(err) == 'table' and err.err or tostring(err)) end
return results
