--[[
  Releases a console debit hold (holdConsoleDebit-4.lua) whose debit did not commit: the console when
  its transaction rolled back ('release'), the reaper when the deadline passed ('reap': the console
  died, or its commit's outcome was unknown). The amount goes back to the mirror it was taken from,
  once: the hold is removed in the same call, and a mirror step that comes later (the debit did
  commit) finds no hold and applies the debit itself (adjustAccountOnce-5.lua). No log row.

  KEYS[1] the hold                 (hash)
  KEYS[2] account balance
  KEYS[3] open reservations by deadline (sorted set)
  KEYS[4] sequence the mirror was seeded with

  ARGV[1] 'release' or 'reap'
  ARGV[2] member of KEYS[3]
  ARGV[3] reap: the reaper's now (Unix ms)

  Returns {code, amount}
  { 1, what went back (0 when the mirror is not the one the hold was taken from: unloaded, or
       reseeded from Postgres since, which never had the hold) }
  {-6, 0} no such hold (consumed, released, or not a hold)
  {-9, 0} reap: the deadline is still ahead; nothing changed
]]
local held = redis.call('HMGET', KEYS[1], 'amount', 'hold', 'seq')
if held[1] == false or held[2] ~= '1' then return {-6, 0} end
if ARGV[1] == 'reap' and tonumber(redis.call('ZSCORE', KEYS[3], ARGV[2]) or '0') > tonumber(ARGV[3]) then return {-9, 0} end
local amount = tonumber(held[1])
local back = 0
if redis.call('EXISTS', KEYS[2]) == 1 and (redis.call('GET', KEYS[4]) or '') == held[3] then
  redis.call('INCRBY', KEYS[2], amount)
  back = amount
end
-- Past the balance nothing may fail (a retry would give the amount back twice).
redis.call('DEL', KEYS[1])
redis.pcall('ZREM', KEYS[3], ARGV[2])
return {1, back}
