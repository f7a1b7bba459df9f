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

  Each slice (or tombstone) a call touches is read once, by one HMGET of every record field its
  settlements need, and written once at the end, by one HSET of what changed; each record field's name
  is made once a call. A call's settlements are usually one slice's, and an HMGET, an HSET and a Lua
  number turned into text (sprintf, about a microsecond here) per settlement were half the script's
  cost: on a Redis of its own, 14 bench-shaped settlements a call, 14-16 µs of Redis a settlement
  before, 10-12.5 µs after, 7-8 µs with no records at all (docs/performance.md, "Slice settlements:
  records read and written once a call").

  A command that fails (a key of the wrong type) stops the call there: the settlements before it are
  applied, with their records and events, and the failing one leaves nothing, its record written only
  once its debit went through, so a retry settles it.

  A slice the reaper released (its relay seemed dead) was renamed to its tombstone with those records:
  a settlement that arrives after that is debited once, from what the tombstone still holds
  (`holding` 1, releaseCreditSlice-4.lua) or, once that went back, from the balance. A request
  whose slice has neither hash nor tombstone was settled before its slice was returned (a relay returns
  a slice only once all its requests' settlements were taken): nothing changes.

  KEYS, 4 per settlement (settlement i uses KEYS[4*(i-1)+1 .. 4*i]):
   1 account balance
   2 the slice (hash)
   3 the slice's tombstone (hash, left by the reaper; `holding` 1 while it holds `amount`)
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

local count = #KEYS / 4

-- Each settlement's record: the field of its bit and the bit's value, and its own field (what relays
-- before the bits wrote, named by the request's number as the relay sent it). A Lua number turned
-- into text (`..`, tostring) costs Redis about a microsecond (sprintf), so each field name is made
-- once a call.
local fieldNames = {}
local fieldOf, bitOf, ownOf = {}, {}, {}
-- The record fields each slice or tombstone key may be asked for in this call.
local wanted = {}
local function want(key, name)
  local w = wanted[key]
  if not w then
    w = { list = {}, seen = {} }
    wanted[key] = w
  end
  if not w.seen[name] then
    w.seen[name] = true
    w.list[#w.list + 1] = name
  end
end
for i = 0, count - 1 do
  local own = ARGV[i * 3 + 3]
  local n = tonumber(own)
  local index = math.floor((n - 1) / RECORD_BITS)
  local field = fieldNames[index]
  if not field then
    field = 'd' .. index
    fieldNames[index] = field
  end
  fieldOf[i], bitOf[i], ownOf[i] = field, 2 ^ ((n - 1) % RECORD_BITS), own
  want(KEYS[i * 4 + 2], field)
  want(KEYS[i * 4 + 2], own)
  want(KEYS[i * 4 + 3], field)
  want(KEYS[i * 4 + 3], own)
end

-- Hashes read so far, by key: `amount` (nil when the hash does not exist; a tombstone keeps what it
-- still holds, 0 once that went back), `holding`,
-- `values` (field -> value), and what this call changed (`changed`, in order, and `amountChanged`).
local hashes = {}
local touched = {}
local function read(key)
  local h = hashes[key]
  if h then return h end
  local names = wanted[key].list
  local got = redis.call('HMGET', key, 'amount', 'holding', unpack(names))
  h = { amount = got[1], holding = got[2] == '1', values = {}, changed = {}, changedList = {}, amountChanged = false }
  for j = 1, #names do h.values[names[j]] = got[j + 2] end
  hashes[key] = h
  touched[#touched + 1] = key
  return h
end

-- Whether settlement i can be recorded in the hash at `key`: nil when the hash does not exist, false
-- when it has the record already, else the record's field and its value with the request's bit set.
local function recordable(key, i)
  local h = read(key)
  if not h.amount then return nil end
  if h.values[ownOf[i]] then return false end
  local field, bit = fieldOf[i], bitOf[i]
  local bits = tonumber(h.values[field]) or 0
  if math.floor(bits / bit) % 2 == 1 then return false end
  return field, bits + bit
end

local function set(key, field, value)
  local h = hashes[key]
  h.values[field] = value
  if not h.changed[field] then
    h.changed[field] = true
    h.changedList[#h.changedList + 1] = field
  end
end

-- Writes what the call changed, one HSET per hash. Runs after a failure too: the settlements before
-- the failing one are applied, as when each wrote at once.
local function writeChanges()
  for _, key in ipairs(touched) do
    local h = hashes[key]
    local args = {}
    for _, field in ipairs(h.changedList) do
      args[#args + 1] = field
      args[#args + 1] = h.values[field]
    end
    if h.amountChanged then
      args[#args + 1] = 'amount'
      args[#args + 1] = h.amount
    end
    if #args > 0 then redis.call('HSET', key, unpack(args)) end
  end
end

local results = {}
local streams = {}
local events = {}

-- A command that fails inside a script does not undo the writes before it: the settlements before a
-- failing one (a key of the wrong type) still go out with their records and events, so a debit in
-- Redis never goes without its event. The failing one leaves nothing: its record is set only after
-- its debit went through.
local function settleAll()
  for i = 0, count - 1 do
    local k = i * 4
    local a = i * 3
    local cost = tonumber(ARGV[a + 1])
    local result = -6
    local slice = KEYS[k + 2]
    local field, value = recordable(slice, i)
    if field then
      set(slice, field, value)
      if cost ~= 0 then
        local h = hashes[slice]
        h.amount = tonumber(h.amount) - cost
        h.amountChanged = true
      end
      result = 1
    elseif field == nil then
      local tombstone = KEYS[k + 3]
      local tField, tValue = recordable(tombstone, i)
      if tField then
        local t = hashes[tombstone]
        if cost ~= 0 then
          if t.holding then
            -- The tombstone still holds the slice's amount (releaseCreditSlice-4.lua 'reap'): the
            -- cost comes out of it, as it would have out of the slice.
            t.amount = tonumber(t.amount) - cost
            t.amountChanged = true
          else
            redis.call('DECRBY', KEYS[k + 1], cost)
          end
        end
        set(tombstone, tField, tValue)
        result = 2
      end
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
writeChanges()
for _, stream in ipairs(streams) do
  redis.call('XADD', stream, '*', 'e', table.concat(events[stream], '\n'))
end
if not ok then return redis.error_reply(type(err) == 'table' and err.err or tostring(err)) end
return results
