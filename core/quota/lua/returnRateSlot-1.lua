--[[
  Gives back a slot that takeRateSlot-1.lua took for a call the relay then did not serve (its
  counting queue was full: a 529 is the relay's refusal, not the client's spending). Only while the
  counter of that minute still lives: an expired one is not recreated, which would leave a key
  without a lifetime.

  KEYS[1] the counter of the minute the slot was taken in

  Returns the counter after the return, or -1 when it no longer exists (nothing changed).
]]
local n = redis.call('GET', KEYS[1])
if not n then return -1 end
if tonumber(n) <= 0 then return 0 end
return redis.call('DECR', KEYS[1])
