#!lua flags=allow-oom
--[[
  Creates the billing consumer group on a usage stream when it does not exist
  (billing/billing-worker.ts #ensureGroup), the stream too when missing (MKSTREAM).

  allow-oom: a billing worker must be able to start, or to recreate a lost group, while Redis is at
  maxmemory (noeviction): billing is what frees its memory. XGROUP CREATE alone is refused then, even
  for a group that exists. What it adds is a few dozen bytes.

  KEYS[1] the usage stream

  ARGV[1] consumer group
  ARGV[2] the id the group starts after ('0': the stream's start)

  Returns 1 when it created the group, 0 when the group existed (BUSYGROUP); other errors as XGROUP.
]]
local r = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'MKSTREAM')
if type(r) == 'table' and r['err'] then
  if string.sub(r['err'], 1, 9) == 'BUSYGROUP' then return 0 end
  return redis.error_reply(r['err'])
end
return 1
