#!lua flags=allow-oom
--[[
  Acknowledges settled usage stream entries and deletes them (billing/billing-worker.ts #acknowledge),
  together: an entry acknowledged is never read by the group again, so it must not stay in the stream
  taking memory either.

  allow-oom: acknowledging is how billing frees Redis memory, so it runs at maxmemory (noeviction) too.
  (In a MULTI it could not: at maxmemory Redis refuses every command queued in one, EXECABORT.)

  KEYS[1] the usage stream

  ARGV[1] consumer group
  ARGV[2..] entry ids

  Returns the number of entries acknowledged (XACK's count: those pending in the group).
]]
-- In slices: unpack of thousands of arguments would overflow Lua's stack.
local acked = 0
for from = 2, #ARGV, 1000 do
  local to = math.min(from + 999, #ARGV)
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, from, to))
  redis.call('XDEL', KEYS[1], unpack(ARGV, from, to))
end
return acked
