-- due.lua: list holds whose expiry has passed, by Redis TIME.
--
-- KEYS[1] holds zset
-- ARGV[1] most ids to return
--
-- Returns the reservation ids, oldest expiry first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now),
  'LIMIT', 0, tonumber(ARGV[1]))
