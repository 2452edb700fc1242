-- restore.lua: put back a sale's line after Redis lost it, from the origin's
-- durable copy. Several edge nodes may notice the loss and call it at once:
-- the first call restores, and every later one finds the line whole (its
-- epoch and counters there) and changes nothing.
--
-- Each counter is set to at least its durable ceiling — no place at or
-- below it can be handed out again, at the price of the unused places
-- between where the counter really was and its ceiling — and the cursor to
-- at least the serving ceiling (but not past the restored line), so no
-- shopper ever admitted is sent back to waiting. Values still in Redis are
-- never lowered (a partial loss). The new ceilings let joins go on at once.
--
-- KEYS[1] line hash  KEYS[2] cursor hash  KEYS[3] pre counter
-- KEYS[4] post counter  KEYS[5] seed
-- ARGV[1] epoch (a fresh id of this restore)  ARGV[2] seed (hex)
-- ARGV[3] rate per second  ARGV[4] '1' paused, '0' not  ARGV[5] settings version
-- ARGV[6] pre counter  ARGV[7] post counter  ARGV[8] now_serving
-- ARGV[9] pre ceiling  ARGV[10] post ceiling  ARGV[11] serving ceiling
-- ARGV[12] draw size, or '' when the draw is not sealed
--
-- Returns 1 when it restored, 0 when the line was whole.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local epoch = redis.call('HGET', KEYS[1], 'epoch')
local h = redis.call('HMGET', KEYS[2], 'now_serving', 'rate', 'settings_version')
local pre_s = redis.call('GET', KEYS[3])
local post_s = redis.call('GET', KEYS[4])
local seed = redis.call('GET', KEYS[5])
if epoch and h[2] and pre_s and post_s and seed then
  return 0
end
local pre = math.max(tonumber(pre_s or '0'), tonumber(ARGV[6]))
local post = math.max(tonumber(post_s or '0'), tonumber(ARGV[7]))
local serving = math.max(tonumber(h[1] or '0'), math.min(tonumber(ARGV[8]), pre + post))
redis.call('SET', KEYS[3], string.format('%.0f', pre))
redis.call('SET', KEYS[4], string.format('%.0f', post))
redis.call('SET', KEYS[5], ARGV[2])
-- No admission credit for the time the line was gone.
redis.call('HSET', KEYS[2], 'now_serving', string.format('%.0f', serving), 'last_ms', string.format('%.3f', now))
if not h[2] or tonumber(ARGV[5]) >= tonumber(h[3] or '0') then
  redis.call('HSET', KEYS[2], 'rate', ARGV[3], 'paused', ARGV[4], 'settings_version', ARGV[5])
end
local l = redis.call('HMGET', KEYS[1], 'pre_ceiling', 'post_ceiling', 'serving_ceiling')
redis.call('HSET', KEYS[1], 'epoch', ARGV[1],
  'pre_ceiling', string.format('%.0f', math.max(tonumber(l[1] or '0'), tonumber(ARGV[9]))),
  'post_ceiling', string.format('%.0f', math.max(tonumber(l[2] or '0'), tonumber(ARGV[10]))),
  'serving_ceiling', string.format('%.0f', math.max(tonumber(l[3] or '0'), tonumber(ARGV[11]))))
if ARGV[12] ~= '' then
  redis.call('HSETNX', KEYS[1], 'draw_size', ARGV[12])
end
return 1
