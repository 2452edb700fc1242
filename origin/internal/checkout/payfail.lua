-- payfail.lua: the shopper's payment failed. The hold goes at once, not at
-- its expiry, and its unit returns to available for those still in line.
-- Like release.lua, only the call that finds the hold held changes anything.
--
-- KEYS[1] reservation hash  KEYS[2] inventory hash  KEYS[3] account hash
-- KEYS[4] holds zset        KEYS[5] intents stream
-- KEYS[6] rebuilding flag: nothing changes while the sale is rebuilt
-- ARGV[1] reservation id
--
-- Returns 1 released; 0 not held (already expired, cancelled or paid);
-- -1 the sale is being rebuilt (try again shortly).
if redis.call('EXISTS', KEYS[6]) == 1 then return -1 end
local h = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'account', 'sku', 'idem')
if h[1] ~= 'held' then return 0 end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[5], '*', 'kind', 'cancel', 'res', ARGV[1], 'account', h[3],
  'sku', h[4], 'idem', h[5], 'expires_ms', h[2], 'at_ms', string.format('%.0f', now))
redis.call('HINCRBY', KEYS[2], 'held', -1)
redis.call('HINCRBY', KEYS[2], 'available', 1)
redis.call('HSET', KEYS[1], 'status', 'cancelled')
redis.call('ZREM', KEYS[4], ARGV[1])
-- The account may buy again; its burned tokens and idempotency keys stay.
if redis.call('HGET', KEYS[3], 'res') == ARGV[1] then
  redis.call('HDEL', KEYS[3], 'res', 'state')
end
return 1
