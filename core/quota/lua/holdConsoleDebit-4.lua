--[[
  Takes a console debit hold: an administrator's debit of an account (console-api/ledger/
  console-ledger.ts takeDebitHold), taken from the balance mirror inside the debit's Postgres
  transaction, before its COMMIT, atomically against every reservation and credit slice of the
  account. A reservation like any other (a hash under the request id `console-debit:<ledger id>`, in
  the deadline set), marked `hold`: it is never settled. After the commit the mirror step consumes it
  (adjustAccountOnce-5.lua: the debit is then in the mirror, taken by this hold); a transaction that
  rolled back releases it (releaseDebitHold-4.lua), and the reaper does at its deadline when the
  console died in between. No log row either way: a hold is no request.

  KEYS[1] account balance          (integer string)
  KEYS[2] the hold                 (hash, must not exist)
  KEYS[3] open reservations by deadline (sorted set)
  KEYS[4] sequence the mirror was seeded with (read only: kept on the hold, so that its consumer and
          its release tell a mirror reseeded meanwhile, which lacks the hold, from this one)

  ARGV[1] amount (integer > 0: the debit's absolute value)
  ARGV[2] deadline                 (Unix ms, the quota store's clock; after it the reaper releases it)
  ARGV[3] user id
  ARGV[4] member of KEYS[3] (`<user id>:console-debit:<ledger id>`)

  Returns
   1  held; also when the hold under this id is this very call's, repeated (a resent command)
  -1  account balance not loaded (caller seeds it from Postgres and retries)
  -3  balance below the amount: nothing held
  -5  another reservation with this id exists
]]
if redis.call('EXISTS', KEYS[2]) == 1 then
  local held = redis.call('HMGET', KEYS[2], 'amount', 'user', 'deadline', 'hold')
  if held[1] == ARGV[1] and held[2] == ARGV[3] and held[3] == ARGV[2] and held[4] == '1' then return 1 end
  return -5
end
local balance = redis.call('GET', KEYS[1])
if not balance then return -1 end
local amount = tonumber(ARGV[1])
if tonumber(balance) < amount then return -3 end
-- The deadline first, as in reserveQuota-8.lua: a hold the reaper cannot see would never come back.
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
redis.call('DECRBY', KEYS[1], amount)
redis.call('HSET', KEYS[2], 'amount', ARGV[1], 'limited', '0', 'token', 0, 'user', ARGV[3], 'deadline', ARGV[2],
  'hold', '1', 'seq', redis.call('GET', KEYS[4]) or '')
return 1
