-- advance.lua: move a sale's admission cursor forward at the pace the
-- calling node computed (package admission's Pacing.Pace: the set rate
-- through the slow start's ramps, bounded by the checkout's answers and the
-- units left). Any edge node may call it every tick: each call admits only
-- the time since the last admission, so concurrent callers never
-- double-advance. The cursor waits while the sale has not started, until
-- the pre-queue's draw size is sealed in the line hash, while paused, while
-- no stock is available, at the durable serving ceiling (the edge raises it
-- ahead of need), when it has reached the end of the line, for a call that
-- holds (the calling node finds the checkout congested: the time since the
-- last call passes unused, so with several nodes the rate falls by the
-- share of them that hold); no credit builds up meanwhile, so it resumes
-- at its pace, in queue order. A call without a pace for the settings
-- Redis holds (the node's first, or one tick after a change) admits
-- nothing and leaves the span to the next call that has one.
--
-- The script keeps what the pace depends on: the rate and pause the
-- settings set, when a resume or raise started its ramp (ramp_ms, set by
-- settings.lua) and from what rate, and the checkout's answer rate,
-- sampled here about once a second from the answers the edges count.
--
-- A call that holds records when in the cursor's held_ms.
--
-- Each call that moves now_serving appends "<now ms>:<now_serving>" to the
-- steps list (one RPUSH; the admission log reads when the cursor
-- reached each place from it), which keeps its first ARGV[9] entries: past them a
-- move is pushed and trimmed off again.
--
-- KEYS[1] cursor hash  KEYS[2] pre counter  KEYS[3] post counter
-- KEYS[4] line hash (epoch, ceilings, draw_size, replid)  KEYS[5] steps list
-- ARGV[1] sale start (unix ms)  ARGV[2] units available (0: none)
-- ARGV[3] pre, ARGV[4] post, ARGV[5] now_serving floors: the highest values
--   the calling node has read (0: none)
-- ARGV[6] hold: 1 to admit nothing this call (0: admit at the pace)
-- ARGV[7] now (unix ms), or '' for Redis TIME: production leaves the time
--   to Redis, one clock for every node; tests set it
-- ARGV[8] reserves the calling node saw the checkout answer (any answer but
--   a failure) since its last call: added to the cursor's answered count,
--   whose rate bounds the slow start
-- ARGV[9] the most steps the steps list keeps
-- ARGV[10] the pace (admissions a second) the node computed, and ARGV[11]
--   the settings version it computed it at ('' or a pace below 0: none)
--
-- Returns {now_serving, queue length, rate (string), paused (0/1), now (unix ms),
--   pre counter, post counter, draw size (-1 until sealed), pre ceiling,
--   post ceiling, serving ceiling, settings version, the checkout's answer
--   rate (string, answers a second), the line's epoch (string: a new one
--   after every restore), when that restore ran (unix ms, 0 if unknown),
--   the proof of work a join needs (leading zero bits, 0: none), the ramp's
--   start (unix ms, -1: none), the rate it ramps from (string)};
--   cursor.go names the
--   positions and the flags, and package line's codes.go LINE_LOST.
-- Fails with LINE_LOST when the line's state is not all there, or Redis
-- lost writes to it: the line was last known good in another Redis history
-- (its replication id is not this Redis's, see restore.lua), or it holds
-- less than the caller has read before (a counter or the cursor below its
-- floor). The edge restores it from the origin. A line without a
-- replication id (restored where INFO was not allowed) takes this Redis's.
local cursor, pre_key, post_key, line_key, steps_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local starts, available = tonumber(ARGV[1]), tonumber(ARGV[2])
local pre_floor, post_floor, serving_floor = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local hold = ARGV[6] == '1'
local answers = tonumber(ARGV[8] or '0')
local max_steps = tonumber(ARGV[9])
local now = tonumber(ARGV[7] or '')
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local h = redis.call('HMGET', cursor, 'now_serving', 'last_ms', 'rate', 'paused', 'settings_version',
  'answered', 'answered_ms', 'answered_then', 'answer_rate', 'ramp_ms', 'ramp_from', 'challenge_bits')
local line = redis.call('HMGET', line_key, 'epoch', 'pre_ceiling', 'post_ceiling', 'serving_ceiling', 'draw_size', 'replid',
  'restored_ms')
local pre_s = redis.call('GET', pre_key)
local post_s = redis.call('GET', post_key)
if not line[1] or not h[3] or not pre_s or not post_s then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
local serving = tonumber(h[1] or '0')
local rate = tonumber(h[3])
local paused = h[4] == '1'
local pre = tonumber(pre_s)
local post = tonumber(post_s)
local ok, info = pcall(redis.call, 'INFO', 'replication')
local replid = ok and string.match(info, 'master_replid:(%x+)')
if replid and line[6] and line[6] ~= replid then
  return redis.error_reply('LINE_LOST this Redis took over from another and may have lost writes to the line; restore it from the origin')
end
if pre < pre_floor or post < post_floor or serving < serving_floor then
  return redis.error_reply('LINE_LOST this Redis holds less of the line than was read from it before; restore it from the origin')
end
if replid and not line[6] then
  redis.call('HSET', line_key, 'replid', replid)
end
-- The checkout's answer rate: answers counted since the sample before,
-- over the time since then, sampled once a second or so.
local answered = tonumber(h[6] or '0') + answers
local answered_ms = tonumber(h[7] or '-1')
local answer_rate = tonumber(h[9] or '0')
if answered_ms < 0 or now < answered_ms then
  redis.call('HSET', cursor, 'answered', answered, 'answered_ms', now, 'answered_then', answered, 'answer_rate', 0)
  answer_rate = 0
elseif now - answered_ms >= 1000 then
  answer_rate = (answered - tonumber(h[8] or '0')) * 1000 / (now - answered_ms)
  redis.call('HSET', cursor, 'answered', answered, 'answered_ms', now, 'answered_then', answered,
    'answer_rate', string.format('%.3f', answer_rate))
elseif answers > 0 then
  redis.call('HSET', cursor, 'answered', answered)
end
local length = pre + post
local serving_ceiling = tonumber(line[4] or '0')
local drawn = line[5] ~= false
local last = math.max(tonumber(h[2] or '0'), starts)
-- The node's pace, if it was computed at the settings Redis holds.
local pace = tonumber(ARGV[10] or '') or -1
if tonumber(ARGV[11] or '') ~= tonumber(h[5] or '0') then pace = -1 end
-- No node ticked for a while (all down, or the first tick of a sale that
-- started long ago): admit at most a second's worth (or one shopper, at
-- paces below one a second), not the whole gap.
local gap = 1000
if pace > 0 and pace < 1 then gap = 1000 / pace end
if now - last > gap then last = now - gap end

if now >= starts then
  local stop = math.min(length, serving_ceiling)
  if hold then
    -- held_ms tells the origin's admission controller the checkout was
    -- congested at an edge: a rate that sends this many is too high.
    redis.call('HSET', cursor, 'last_ms', string.format('%.3f', math.max(now, last)), 'held_ms', now)
  elseif pace < 0 then
    -- No pace for these settings yet (the node's first reading, or one
    -- from before a change): the span waits for a call that has one.
  elseif paused or not drawn or available <= 0 or serving >= stop or pace == 0 then
    redis.call('HSET', cursor, 'last_ms', string.format('%.3f', math.max(now, last)))
  else
    local add = math.floor((now - last) * pace / 1000)
    if add > 0 then
      local next = math.min(serving + add, stop)
      if next == stop then
        last = now
      else
        last = last + add * 1000 / pace -- keep the unused fraction of a slot
      end
      serving = next
      redis.call('HSET', cursor, 'now_serving', string.format('%.0f', serving), 'last_ms', string.format('%.3f', last))
      if redis.call('RPUSH', steps_key, string.format('%.0f:%.0f', now, serving)) > max_steps then
        redis.call('LTRIM', steps_key, 0, max_steps - 1)
      end
    end
  end
end
local p = 0
if paused then p = 1 end
local draw = -1
if drawn then draw = tonumber(line[5]) end
return {serving, length, tostring(rate), p, now, pre, post, draw,
  tonumber(line[2] or '0'), tonumber(line[3] or '0'), serving_ceiling, tonumber(h[5] or '0'),
  string.format('%.3f', answer_rate), line[1], tonumber(line[7] or '0'), tonumber(h[12] or '0'),
  tonumber(h[10] or '-1'), h[11] or '0'}
