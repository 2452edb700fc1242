-- join.lua: give each account of a batch its place in a sale's line, or the
-- place it already has. Before the start (by Redis TIME) a join takes the next
-- pre-queue index, to be shuffled at the start; after it, the next position
-- behind the whole pre-queue, which no longer grows.
--
-- KEYS[1] pre counter  KEYS[2] post counter  KEYS[3] places hash
-- ARGV[1] sale start (unix ms)  ARGV[2..] accounts
--
-- Returns one value per account: "p<i>" (pre-queue index i, 1-based) or
-- "<position>" (1-based), then the queue length as the last value.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local place = redis.call('HGET', KEYS[3], ARGV[i])
  if not place then
    if now < starts then
      place = 'p' .. redis.call('INCR', KEYS[1])
    else
      local pre = tonumber(redis.call('GET', KEYS[1]) or '0')
      place = tostring(pre + redis.call('INCR', KEYS[2]))
    end
    redis.call('HSET', KEYS[3], ARGV[i], place)
  end
  out[#out + 1] = place
end
local length = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(redis.call('GET', KEYS[2]) or '0')
out[#out + 1] = tostring(length)
return out
