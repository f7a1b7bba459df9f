--[[
  Settles a reservation: gives back what was reserved, debits the actual cost, counts the tokens
  against the key's per-minute token budget, and appends the usage event to the billing stream,
  atomically, so that a debit in Redis always has its event and the other way round. A second call
  for the same reservation changes nothing.

  A reservation the reaper already released (its deadline passed: the relay seemed dead) left a
  tombstone; a settlement that arrives after that still debits the actual cost, from the balance the
  reaper restored, so a very long request is billed exactly, never twice and never for free.

  KEYS[1] account balance
  KEYS[2] key remaining quota (touched only if the key is limited)
  KEYS[3] reservation
  KEYS[4] usage stream
  KEYS[5] key's token counter of the current minute
  KEYS[6] open reservations by deadline (sorted set)
  KEYS[7] tombstone of a reaped reservation; with ARGV[8] > 0 also the marker of a settled one

  ARGV[1] actual cost (integer >= 0; 0 refunds the whole reservation)
  ARGV[2] usage event (JSON, core/usage/usage-event.ts)
  ARGV[3] tokens used (input + output), counted when > 0
  ARGV[4] reservation member of KEYS[6]
  ARGV[5] '1' if this is the reaper releasing the reservation (leaves the tombstone), else '0'
  ARGV[6] the reaper's now (Unix ms; reaper only, '' or absent otherwise): a deadline a live relay
          renewed past it since the reaper read the deadline set is not released
  ARGV[7] relay only, with replicas (optional): '1' if the key is limited, for a lost reservation
  ARGV[8] relay only, with replicas (optional): seconds a settled reservation's marker (KEYS[7] = 'S')
          lives; 0 or absent: no marker
  ARGV[9] relay only, with replicas (optional): Unix ms before which a missing reservation with
          neither marker nor tombstone was lost, not settled

  A Redis failover loses the writes its master had not yet sent to the replica (replication is
  asynchronous): a reservation can vanish before its settlement arrives, or a settlement vanish and be
  replayed from the relay's spool. With the marker, "already settled" (marker) and "reaped"
  (tombstone) are told from "lost" (neither): a lost reservation's settlement debits the cost alone,
  as the lost reservation's hold went with it, and emits its event, once (it leaves the marker). The
  marker outlives any replay the relay can send before ARGV[9], so a settlement that did run is never
  taken for a lost one.

  Returns
   the stream entry id on success
  -6  no such reservation (already settled, or never made)
  -9  reaper only: the deadline was renewed (its relay is alive); nothing changed
]]
local cost = tonumber(ARGV[1])
local markerSec = tonumber(ARGV[8] or '0') or 0
local reservation = redis.call('HMGET', KEYS[3], 'amount', 'limited')
local amount, limited
if reservation[1] then
  if ARGV[5] == '1' and ARGV[6] and ARGV[6] ~= '' and tonumber(redis.call('ZSCORE', KEYS[6], ARGV[4]) or '0') > tonumber(ARGV[6]) then return -9 end
  amount = tonumber(reservation[1])
  limited = reservation[2]
  redis.call('DEL', KEYS[3])
  redis.call('ZREM', KEYS[6], ARGV[4])
  if ARGV[5] == '1' then redis.call('SET', KEYS[7], limited, 'EX', 86400)
  elseif markerSec > 0 then redis.call('SET', KEYS[7], 'S', 'EX', markerSec) end
else
  if ARGV[5] == '1' then return -6 end
  limited = redis.call('GET', KEYS[7])
  if limited == 'S' then return -6 end
  if not limited then
    -- Neither settled nor reaped here: lost in a failover, if the relay says it may be.
    if markerSec <= 0 or not ARGV[9] then return -6 end
    local now = redis.call('TIME')
    if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) >= tonumber(ARGV[9]) then return -6 end
    limited = ARGV[7]
  end
  -- Late settlement after the reaper refunded everything, or a lost reservation: the cost alone.
  amount = 0
  if markerSec > 0 then redis.call('SET', KEYS[7], 'S', 'EX', markerSec) else redis.call('DEL', KEYS[7]) end
end

local delta = amount - cost
if delta ~= 0 then
  redis.call('INCRBY', KEYS[1], delta)
  if limited == '1' then redis.call('INCRBY', KEYS[2], delta) end
end
local tokens = tonumber(ARGV[3])
if tokens > 0 then
  redis.call('INCRBY', KEYS[5], tokens)
  redis.call('EXPIRE', KEYS[5], 120)
end
return redis.call('XADD', KEYS[4], '*', 'e', ARGV[2])
