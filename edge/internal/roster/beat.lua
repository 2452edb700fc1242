-- Beat: write node ARGV[1]'s state ARGV[2] into the roster KEYS[1],
-- stamped with Redis's clock (ms), and drop the nodes silent for more than
-- ARGV[3] ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2])
local forget = tonumber(ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local at = tonumber(string.match(all[i + 1], '^(%d+) '))
  if at and now - at > forget then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return now
