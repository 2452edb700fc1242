-- due.lua: list holds whose expiry has passed, by Redis TIME.
--
-- KEYS[1] holds zset
-- ARGV[1] most ids to return
--
-- Returns the reservation ids, oldest expiry first.
local holds = KEYS[1]
local limit = tonumber(ARGV[1])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', holds, '-inf', string.format('%.0f', now), 'LIMIT', 0, limit)
