-- advance.lua: move a sale's admission cursor forward at its rate, by Redis
-- TIME. Any edge node may call it every tick: each call admits only the time
-- since the last admission, so concurrent callers never double-advance.
-- The cursor waits while the sale has not started, while paused, while no
-- stock is available, and when it has reached the end of the line; no credit
-- builds up meanwhile, so it resumes at its rate, in queue order. While few
-- units are available it admits at most twice that many a second: units
-- that come back one by one go to about as many shoppers, not to a
-- second's worth of the line.
--
-- KEYS[1] cursor hash  KEYS[2] pre counter  KEYS[3] post counter
-- ARGV[1] sale start (unix ms)  ARGV[2] units available (0: none)
-- ARGV[3] rate per second to set if none is set yet
--
-- Returns {now_serving, queue length, rate (string), paused (0/1), now (unix ms),
--   pre-queue size}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts = tonumber(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'now_serving', 'last_ms', 'rate', 'paused')
local serving = tonumber(h[1] or '0')
local rate = tonumber(h[3] or '')
if not rate then
  rate = tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'rate', ARGV[3], 'paused', '0', 'now_serving', '0')
end
local paused = h[4] == '1'
local pre = tonumber(redis.call('GET', KEYS[2]) or '0')
local length = pre + tonumber(redis.call('GET', KEYS[3]) or '0')
local last = math.max(tonumber(h[2] or '0'), starts)
-- No node ticked for a while (all down, or the first tick of a sale that
-- started long ago): admit at most a second's worth (or one shopper, at
-- rates below one a second), not the whole gap.
local rate_now = tonumber(h[3] or ARGV[3])
local gap = 1000
if rate_now > 0 and rate_now < 1 then gap = 1000 / rate_now end
if now - last > gap then last = now - gap end

local available = tonumber(ARGV[2])
if now >= starts then
  -- The pace this tick: the rate, or twice the units left if that is less.
  -- The configured rate is what the script returns.
  local pace = rate
  if available > 0 and available * 2 < pace then pace = available * 2 end
  if paused or available <= 0 or serving >= length or pace <= 0 then
    redis.call('HSET', KEYS[1], 'last_ms', string.format('%.3f', math.max(now, last)))
  else
    local add = math.floor((now - last) * pace / 1000)
    if add > 0 then
      local next = math.min(serving + add, length)
      if next == length then
        last = now
      else
        last = last + add * 1000 / pace -- keep the unused fraction of a slot
      end
      serving = next
      redis.call('HSET', KEYS[1], 'now_serving', string.format('%.0f', serving), 'last_ms', string.format('%.3f', last))
    end
  end
end
local p = 0
if paused then p = 1 end
return {serving, length, tostring(rate), p, now, pre}
