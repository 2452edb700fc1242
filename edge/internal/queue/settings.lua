-- settings.lua: put a sale's admission rate and pause switch, as the origin's
-- durable copy of the line holds them after a change, into Redis. Every edge
-- node's next tick runs with the new values. Two changes that race reach
-- Redis in either order; the settings version (bumped by the origin with
-- each change) keeps the newer.
--
-- A resume and a raised rate start a ramp, as the sale's start does (see
-- package admission's advance.lua): a resume from nothing, a raise from the
-- rate before it. The checkout was idle during the pause, or took the old
-- rate; the wave the new setting lets through comes back only a poll and a
-- reserve later. A raise while a ramp runs lets that ramp go on, to the new
-- rate.
--
-- KEYS[1] cursor hash  KEYS[2] line hash (epoch)
-- ARGV[1] rate per second  ARGV[2] '1' paused, '0' not  ARGV[3] settings version
--
-- Returns {rate (string), paused (0/1), now_serving} as Redis holds them
-- afterwards (codes.go names the flag).
-- Fails with LINE_LOST when the line's state is not there (Redis lost it):
-- the edge restores it from the origin, which has the change already.
local cursor, line_key = KEYS[1], KEYS[2]
local new_rate, new_paused, version = ARGV[1], ARGV[2], ARGV[3]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', cursor, 'rate', 'paused', 'now_serving', 'last_ms', 'settings_version', 'ramp_ms')
if not redis.call('HGET', line_key, 'epoch') or not h[1] then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
local rate, paused = h[1], h[2] or '0'
if tonumber(version) > tonumber(h[5] or '0') then
  rate, paused = new_rate, new_paused
  -- Admission so far was at the old rate: the new one counts from now.
  local last = math.max(tonumber(h[4] or '0'), now)
  redis.call('HSET', cursor, 'rate', rate, 'paused', paused, 'settings_version', version,
    'last_ms', string.format('%.3f', last))
  local ramping = h[6] and now - tonumber(h[6]) < 6000
  if paused == '0' and h[2] == '1' then
    redis.call('HSET', cursor, 'ramp_ms', now, 'ramp_from', 0)
  elseif paused == '0' and tonumber(rate) > tonumber(h[1]) and not ramping then
    redis.call('HSET', cursor, 'ramp_ms', now, 'ramp_from', h[1])
  end
end
local p = 0
if paused == '1' then p = 1 end
return {rate, p, tonumber(h[3] or '0')}
