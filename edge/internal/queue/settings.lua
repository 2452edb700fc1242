-- settings.lua: change a sale's admission rate and/or pause switch. Every
-- edge node's next tick runs with the new values.
--
-- KEYS[1] cursor hash
-- ARGV[1] new rate per second, or '' to keep it
-- ARGV[2] '1' pause, '0' resume, '' keep
-- ARGV[3] rate per second to start from if none is set yet
--
-- Returns {rate (string), paused (0/1), now_serving}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'rate', 'paused', 'now_serving', 'last_ms')
local rate = h[1] or ARGV[3]
local paused = h[2] or '0'
if ARGV[1] ~= '' then rate = ARGV[1] end
if ARGV[2] ~= '' then paused = ARGV[2] end
-- Admission so far was at the old rate: the new one counts from now.
local last = math.max(tonumber(h[4] or '0'), now)
redis.call('HSET', KEYS[1], 'rate', rate, 'paused', paused, 'last_ms', string.format('%.3f', last))
if not h[3] then redis.call('HSET', KEYS[1], 'now_serving', '0') end
local p = 0
if paused == '1' then p = 1 end
return {rate, p, tonumber(h[3] or '0')}
