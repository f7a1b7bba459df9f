#!lua
--[[
  Moves usage stream entries the billing worker could not bill (undecodable, or refused by Postgres
  for their values) to the dead-letter stream, then acknowledges and deletes them
  (billing/billing-worker.ts #acknowledge): an entry is acknowledged only once its dead letter is
  written, so its Redis debit stays visible for an operator to mend and replay
  (replay-dead-letters.ts). One script, so either all of it happens or none.

  Not allow-oom (a shebang without flags): at maxmemory (noeviction) Redis refuses the whole script
  before it runs, and the entries stay pending, to be tried again once billing has freed memory. A
  dead-letter key of another type is refused before anything is written (WRONGTYPE), likewise.

  KEYS[1] the usage stream
  KEYS[2] the dead-letter stream

  ARGV[1] consumer group
  ARGV[2] n: the number of entry ids that follow
  ARGV[3 .. 2+n] entry ids to acknowledge and delete once the dead letters are written
  then, for each dead letter: the number of its field and value strings, then those strings

  Returns the number of dead letters written.
]]
local t = redis.call('TYPE', KEYS[2])['ok']
if t ~= 'stream' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the dead-letter stream ' .. KEYS[2] .. ' holds a ' .. t .. ', not a stream: nothing written, nothing acknowledged')
end
local n = tonumber(ARGV[2])
local i = 3 + n
local written = 0
while i <= #ARGV do
  local count = tonumber(ARGV[i])
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, i + 1, i + count))
  written = written + 1
  i = i + 1 + count
end
-- In slices: unpack of thousands of arguments would overflow Lua's stack.
for from = 3, 2 + n, 1000 do
  local to = math.min(from + 999, 2 + n)
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, from, to))
  redis.call('XDEL', KEYS[1], unpack(ARGV, from, to))
end
return written
