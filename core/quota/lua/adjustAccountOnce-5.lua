--[[
  Applies a console change of an account (identified by its ledger id) to the Redis mirror of its
  balance at most once, however often it is retried: the console after its commit, and the billing
  worker's follow-up if the console failed, may both try (core/ledger/console-credit-follow-up.ts).
  adjustBalanceOnce-3.lua plus console debit holds: an administrator's debit took a hold of its
  amount from the mirror before its commit (holdConsoleDebit-4.lua); when the hold is still there the
  debit is already in the mirror, and this call consumes the hold (removes it, gives nothing back)
  instead of moving the mirror. When the reaper released the hold first (its deadline passed), the
  debit is applied as any change is: once, either way.

  A mirror seeded from Postgres after the change committed already holds it (seedBalance-2.lua records
  the users.credit_seq it was read with); the change is then only marked (and a hold, which that
  mirror never had, only removed).

  KEYS[1] account balance
  KEYS[2] marker of this change having been applied
  KEYS[3] sequence the mirror was seeded with (absent: seeded before sequences existed)
  KEYS[4] the change's console debit hold, if any (hash `console-debit:<ledger id>`)
  KEYS[5] open reservations by deadline (sorted set)

  ARGV[1] delta (integer, may be negative)
  ARGV[2] marker lifetime in seconds
  ARGV[3] the change's sequence (ledger.credit_seq); '' when it has none
  ARGV[4] the hold's member of KEYS[5]

  Returns {2} when already applied (a hold still there was then not consumed: the change reached the
  mirror by an older worker's adjustBalanceOnce-3.lua, and the reaper gives the hold back), {1, new
  value} when applied to a loaded mirror, {0} when the mirror is not loaded (it will be seeded from
  Postgres, which holds the change; the marker is set anyway), {3} when the mirror was seeded from a
  Postgres state that already held the change, {4, value} when the change's hold was consumed.

  An unloaded mirror's KEYS[3] is raised to the change's sequence: a seed read from Postgres before
  the change committed and written after this call would lack it, and seedBalance-2.lua refuses a
  seed older than KEYS[3] (the caller reads Postgres again).
]]
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[2]) == false then return {2} end
local delta = tonumber(ARGV[1])
local hold = redis.call('HMGET', KEYS[4], 'amount', 'hold', 'seq')
local holdSeq = nil
if hold[1] ~= false and hold[2] == '1' then
  redis.call('DEL', KEYS[4])
  redis.pcall('ZREM', KEYS[5], ARGV[4])
  holdSeq = hold[3]
  -- What the hold took is already off the mirror it was taken from: the rest of the delta (none, as
  -- the console holds exactly the debit) is applied below.
  delta = delta + tonumber(hold[1])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[3] ~= '' and tonumber(ARGV[3]) > tonumber(redis.call('GET', KEYS[3]) or '-1') then
    redis.call('SET', KEYS[3], ARGV[3])
  end
  return {0}
end
local seeded = redis.call('GET', KEYS[3])
if ARGV[3] ~= '' and tonumber(ARGV[3]) <= tonumber(seeded or '-1') then return {3} end
if holdSeq ~= nil then
  -- The mirror the hold was taken from (the same seed): the hold was the debit.
  if (seeded or '') == holdSeq then
    if delta == 0 then return {4, tonumber(redis.call('GET', KEYS[1]))} end
    return {4, redis.call('INCRBY', KEYS[1], delta)}
  end
  -- Reseeded from Postgres before the change committed: that mirror had neither the hold nor the
  -- change, which is applied whole.
  delta = tonumber(ARGV[1])
end
return {1, redis.call('INCRBY', KEYS[1], delta)}
