--[[
  Removes the consumers of a usage stream's billing group that hold no pending entry and have been
  idle at least ARGV[3] ms, other than ARGV[2] (billing/consumer-pruning.ts). A worker's consumer name
  is its host and pid, so every restart left one behind.

  Atomic: XGROUP DELCONSUMER drops what a consumer holds, so the check and the removal must see the
  same state. Read apart, a quiet live worker (Redis 7.0 counts idle from the last read that returned
  entries) could read entries between them and lose them from the pending list.

  KEYS[1] the usage stream

  ARGV[1] consumer group
  ARGV[2] the calling worker's consumer (never removed)
  ARGV[3] idle time, ms

  Returns the names removed (an empty array when none, or when the stream or group is missing).
]]
local info = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if type(info) == 'table' and info['err'] then return {} end
local idleMs = tonumber(ARGV[3])
local removed = {}
for _, fields in ipairs(info) do
  local c = {}
  for i = 1, #fields, 2 do c[fields[i]] = fields[i + 1] end
  if c['name'] ~= ARGV[2] and tonumber(c['pending']) == 0 and tonumber(c['idle']) >= idleMs then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], c['name'])
    removed[#removed + 1] = c['name']
  end
end
return removed
