-- settings.lua: put a sale's admission rate and pause switch, as the origin's
-- durable copy of the line holds them after a change, into Redis. Every edge
-- node's next tick runs with the new values. Two changes that race reach
-- Redis in either order; the settings version (bumped by the origin with
-- each change) keeps the newer.
--
-- Applying a version also brings the serving ceiling down to the cursor
-- plus the new settings' serving block (ARGV[4]: none while paused, about
-- two seconds of admissions at the new rate), never below the cursor. The
-- ceiling is what a restore resumes the cursor at after Redis loses the
-- line: a ceiling raised for the old rate would otherwise admit that many
-- shoppers early, or while paused. The edge then reports the lowered
-- ceiling to the origin, which lowers its copy (package line).
--
-- A resume and a raised rate start a ramp, as the sale's start does (see
-- package admission's advance.lua): a resume from nothing, a raise from the
-- rate before it. The checkout was idle during the pause, or took the old
-- rate; the wave the new setting lets through comes back only a poll and a
-- reserve later. A raise while a ramp runs lets that ramp go on, to the new
-- rate.
--
-- KEYS[1] cursor hash  KEYS[2] line hash (epoch, serving_ceiling, replid)
-- KEYS[3] pre counter  KEYS[4] post counter
-- ARGV[1] rate per second  ARGV[2] '1' paused, '0' not  ARGV[3] settings version
-- ARGV[4] serving block of these settings (positions)
-- ARGV[5] pre, ARGV[6] post, ARGV[7] now_serving floors: the highest values
--   the calling node has read (0: none)
-- ARGV[8] challenge bits: the proof of work a join needs (0: none)
-- ARGV[9] now (unix ms), or '' for Redis TIME: production leaves the time
--   to Redis; tests set it
--
-- Returns {rate (string), paused (0/1), now_serving, serving ceiling,
-- settings version, challenge bits} as Redis holds them afterwards
-- (codes.go names the flag).
-- Fails with LINE_LOST when the line's state is not there (Redis lost it),
-- or Redis lost writes to it (another Redis history, or less than the
-- caller read: see advance.lua): the edge restores it from the origin,
-- which has the change already.
local cursor, line_key, pre_key, post_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local new_rate, new_paused, version = ARGV[1], ARGV[2], ARGV[3]
local block = tonumber(ARGV[4])
local pre_floor, post_floor, serving_floor = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local new_bits = ARGV[8]

local now = tonumber(ARGV[9] or '')
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local h = redis.call('HMGET', cursor, 'rate', 'paused', 'now_serving', 'last_ms', 'settings_version', 'ramp_ms',
  'challenge_bits')
local line = redis.call('HMGET', line_key, 'epoch', 'serving_ceiling', 'replid')
local pre_s = redis.call('GET', pre_key)
local post_s = redis.call('GET', post_key)
if not line[1] or not h[1] or not pre_s or not post_s then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
local ok, info = pcall(redis.call, 'INFO', 'replication')
local replid = ok and string.match(info, 'master_replid:(%x+)')
if replid and line[3] and line[3] ~= replid then
  return redis.error_reply('LINE_LOST this Redis took over from another and may have lost writes to the line; restore it from the origin')
end
local serving = tonumber(h[3] or '0')
if tonumber(pre_s) < pre_floor or tonumber(post_s) < post_floor or serving < serving_floor then
  return redis.error_reply('LINE_LOST this Redis holds less of the line than was read from it before; restore it from the origin')
end
local rate, paused, bits = h[1], h[2] or '0', h[7] or '0'
local ceiling = tonumber(line[2] or '0')
local applied = tonumber(h[5] or '0')
if tonumber(version) > applied then
  rate, paused, bits, applied = new_rate, new_paused, new_bits, tonumber(version)
  -- Admission so far was at the old rate: the new one counts from now.
  local last = math.max(tonumber(h[4] or '0'), now)
  redis.call('HSET', cursor, 'rate', rate, 'paused', paused, 'challenge_bits', bits, 'settings_version', version,
    'last_ms', string.format('%.3f', last))
  local ramping = h[6] and now - tonumber(h[6]) < 6000
  if paused == '0' and h[2] == '1' then
    redis.call('HSET', cursor, 'ramp_ms', now, 'ramp_from', 0)
  elseif paused == '0' and tonumber(rate) > tonumber(h[1]) and not ramping then
    redis.call('HSET', cursor, 'ramp_ms', now, 'ramp_from', h[1])
  end
  local lowered = math.max(serving, math.min(ceiling, serving + block))
  if lowered < ceiling then
    ceiling = lowered
    redis.call('HSET', line_key, 'serving_ceiling', string.format('%.0f', ceiling))
  end
end
local p = 0
if paused == '1' then p = 1 end
return {rate, p, serving, ceiling, applied, tonumber(bits)}
