-- take.lua: the seckill's one atomic step, take one unit of a SKU if any is
-- left. It reads no account, token or idempotency key.
--
-- KEYS[1]  the SKU's stock counter (string, units left)
--
-- Returns the units left after taking one (0 or more), or -1 when none was
-- left (or the counter is missing).
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left <= 0 then
  return -1
end
return redis.call('DECR', KEYS[1])
