-- restore.lua: put back a sale's line after Redis lost it, from the origin's
-- durable copy. Redis loses a line in two ways: its keys go (a restart
-- without persistence, FLUSHALL, an empty replica promoted), or they stay
-- with older values (a replica that lagged was promoted, or a restart
-- reloaded a file missing the last writes). The second is found by the
-- line's replication id — the Redis history the line was last known good
-- in (INFO replication's master_replid, changed by every promotion and
-- restart) — and by floors, the highest values the calling node has read:
-- a Redis holding less has lost writes. Several edge nodes may notice at
-- once: the first call restores, and every later one finds the line whole,
-- in this history and at its floors (a restore raises each value past any
-- node's reading), and changes nothing.
--
-- Each counter is set to at least its durable ceiling — no place at or
-- below it can be handed out again, at the price of the unused places
-- between where the counter really was and its ceiling — and the cursor to
-- at least the durable serving ceiling (but not past the restored line),
-- so no shopper ever admitted is sent back to waiting. No counter or cursor
-- still in Redis is ever lowered. The serving ceiling is set to the one
-- given (the edge sizes it from the settings restored, and the origin's
-- copy covers it): a lagging replica's older, higher ceiling does not
-- survive the restore. A line whose settings in Redis are newer than the
-- ones restored is left alone (3): a node applied a change after this one
-- read the origin's copy, and the next tick restores with the new one.
-- The new join ceilings let joins go on at once.
--
-- KEYS[1] line hash  KEYS[2] cursor hash  KEYS[3] pre counter
-- KEYS[4] post counter  KEYS[5] seed
-- ARGV[1] epoch (a fresh id of this restore)  ARGV[2] seed (hex)
-- ARGV[3] rate per second  ARGV[4] '1' paused, '0' not  ARGV[5] settings version
-- ARGV[6] pre counter  ARGV[7] post counter  ARGV[8] now_serving
-- ARGV[9] pre ceiling  ARGV[10] post ceiling  ARGV[11] serving ceiling
--   (the join ceilings only rise; the serving one is set, and never below
--   the restored cursor)
-- ARGV[12] draw size, or '' when the draw is not sealed
-- ARGV[13] pre, ARGV[14] post, ARGV[15] now_serving floors (0: none)
-- ARGV[16] challenge bits
--
-- Returns (codes.go names them) 0 when the line was whole, 1 when it
-- restored a line whose keys were missing, 2 when it restored a line that
-- had lost writes, 3 when it changed nothing because Redis holds newer
-- settings. It never fails with LINE_LOST: it is what ends a loss.
local line_key, cursor, pre_key, post_key, seed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local epoch, seed_hex = ARGV[1], ARGV[2]
local rate, paused, version = ARGV[3], ARGV[4], ARGV[5]
local resume_pre, resume_post, resume_serving = ARGV[6], ARGV[7], ARGV[8]
local pre_ceiling, post_ceiling, serving_ceiling = ARGV[9], ARGV[10], ARGV[11]
local draw_size = ARGV[12]
local pre_floor, post_floor, serving_floor = ARGV[13], ARGV[14], ARGV[15]
local bits = ARGV[16]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- '' when INFO is not allowed here: then only the floors find lost writes.
local ok, info = pcall(redis.call, 'INFO', 'replication')
local replid = ok and string.match(info, 'master_replid:(%x+)') or ''
local line = redis.call('HMGET', line_key, 'epoch', 'replid')
local h = redis.call('HMGET', cursor, 'now_serving', 'rate', 'settings_version')
local pre_s = redis.call('GET', pre_key)
local post_s = redis.call('GET', post_key)
local seed = redis.call('GET', seed_key)
local outcome = 1
if line[1] and h[2] and pre_s and post_s and seed then
  local foreign = line[2] and replid ~= '' and line[2] ~= replid
  local below = tonumber(pre_s) < tonumber(pre_floor) or tonumber(post_s) < tonumber(post_floor) or
    tonumber(h[1] or '0') < tonumber(serving_floor)
  if not foreign and not below then
    return 0
  end
  outcome = 2
end
if tonumber(h[3] or '0') > tonumber(version) then
  return 3
end
local pre = math.max(tonumber(pre_s or '0'), tonumber(resume_pre))
local post = math.max(tonumber(post_s or '0'), tonumber(resume_post))
local serving = math.max(tonumber(h[1] or '0'), math.min(tonumber(resume_serving), pre + post))
redis.call('SET', pre_key, string.format('%.0f', pre))
redis.call('SET', post_key, string.format('%.0f', post))
redis.call('SET', seed_key, seed_hex)
-- No admission credit for the time the line was gone.
redis.call('HSET', cursor, 'now_serving', string.format('%.0f', serving), 'last_ms', string.format('%.3f', now))
redis.call('HSET', cursor, 'rate', rate, 'paused', paused, 'challenge_bits', bits, 'settings_version', version)
local l = redis.call('HMGET', line_key, 'pre_ceiling', 'post_ceiling')
if replid ~= '' then
  redis.call('HSET', line_key, 'replid', replid)
end
-- A restore at zero ceilings creates the line: no place was handed out
-- before it, so no queue token can predate it (restored_ms: see State).
if tonumber(resume_pre) + tonumber(resume_post) > 0 then
  redis.call('HSET', line_key, 'restored_ms', now)
end
redis.call('HSET', line_key, 'epoch', epoch,
  'pre_ceiling', string.format('%.0f', math.max(tonumber(l[1] or '0'), tonumber(pre_ceiling))),
  'post_ceiling', string.format('%.0f', math.max(tonumber(l[2] or '0'), tonumber(post_ceiling))),
  'serving_ceiling', string.format('%.0f', math.max(serving, tonumber(serving_ceiling))))
if draw_size ~= '' then
  redis.call('HSETNX', line_key, 'draw_size', draw_size)
end
return outcome
