--[[
  Applies a console-side change (identified by its ledger id, or its key_quota_edits id for a key)
  to the Redis mirror of an account balance or of a key's remaining quota at most once, however often
  it is retried: the console after its commit, and the billing worker's follow-up if the console
  failed, may both try. A mirror seeded from Postgres after the change committed already holds it
  (seedBalance-2.lua records the users.credit_seq or tokens.quota_seq it was read with); the change
  is then only marked.

  KEYS[1] account balance or key remaining quota
  KEYS[2] marker of this change having been applied
  KEYS[3] sequence the mirror was seeded with (absent: seeded before sequences existed)

  ARGV[1] delta (integer, may be negative)
  ARGV[2] marker lifetime in seconds
  ARGV[3] the change's sequence (ledger.credit_seq, key_quota_edits.quota_seq); '' when it has none

  Returns {2} when already applied, {1, new value} when applied to a loaded mirror, {0} when the mirror
  is not loaded (it will be seeded from Postgres, which holds the change; the marker is set anyway),
  {3} when the mirror was seeded from a Postgres state that already held the change.

  An unloaded mirror's KEYS[3] is raised to the change's sequence: a seed read from Postgres before
  the change committed and written after this call would lack it, and seedBalance-2.lua refuses a
  seed older than KEYS[3] (the caller reads Postgres again).
]]
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) == false then return {2} end
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[3] ~= '' and tonumber(ARGV[3]) > tonumber(redis.call('GET', KEYS[3]) or '-1') then
    redis.call('SET', KEYS[3], ARGV[3])
  end
  return {0}
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) <= tonumber(redis.call('GET', KEYS[3]) or '-1') then return {3} end
return {1, redis.call('INCRBY', KEYS[1], ARGV[1])}
