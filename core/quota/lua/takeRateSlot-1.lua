--[[
  Takes one slot of a per-minute budget (the key's count_tokens calls and prompt counts): one round
  trip, the counter expiring with its minute. A refused call still counts, so a client that keeps
  hammering stays refused until the minute ends.

  KEYS[1] the counter of the current minute

  ARGV[1] slots per minute (integer > 0)
  ARGV[2] counter lifetime in seconds

  Returns 1 when the slot is taken, 0 when the budget is spent.
]]
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then return 0 end
return 1
