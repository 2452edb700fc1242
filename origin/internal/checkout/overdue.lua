-- overdue.lua: count the holds whose expiry passed more than a while ago,
-- by Redis TIME (the clock that set the expiries and that due.lua goes by).
--
-- KEYS[1] holds zset
-- ARGV[1] how long past its expiry a hold counts as overdue (ms)
--
-- Returns the count: one ZCOUNT on the expiry index, no scan.
local holds = KEYS[1]
local late_ms = tonumber(ARGV[1])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', holds, '-inf', '(' .. string.format('%.0f', now - late_ms))
