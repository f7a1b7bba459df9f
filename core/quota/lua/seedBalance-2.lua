--[[
  Seeds a missing account balance (or key remaining quota) mirror from Postgres together with the
  sequence the value was read with, so that a console change committed before the read is not
  applied to it again (adjustBalanceOnce-3.lua). A mirror already loaded is left as it is, sequence
  included.

  KEYS[1] account balance or key remaining quota
  KEYS[2] sequence of the seed

  ARGV[1] users.quota or tokens.remain_quota
  ARGV[2] users.credit_seq or tokens.quota_seq read in the same row
  ARGV[3] seconds both keys live, 0 for ever: a deleted row's (a request whose key or account was
          deleted while its body came in seeds after the deletion expired the mirrors, which then
          did not exist: they would stay for ever)

  Returns 1 when seeded, 0 when the mirror was already loaded, -1 when the read is older than a
  change that reached Redis while the mirror was unloaded (adjustBalanceOnce-3.lua raised KEYS[2]
  past ARGV[2]): the caller reads Postgres again. Sequences only grow, so a fresh read is never
  refused.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if tonumber(ARGV[2]) < tonumber(redis.call('GET', KEYS[2]) or '-1') then return -1 end
local ttl = tonumber(ARGV[3]) or 0
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ttl)
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
