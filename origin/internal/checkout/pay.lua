-- pay.lua: the shopper paid. A held unit becomes sold, exactly once: the
-- webhook, its duplicates and the reconciler may all call it.
-- Like reserve.lua, the intent is the first write.
--
-- KEYS[1] reservation hash  KEYS[2] inventory hash  KEYS[3] account hash
-- KEYS[4] holds zset        KEYS[5] intents stream
-- KEYS[6] rebuilding flag: nothing changes while the sale is rebuilt
-- ARGV[1] reservation id    ARGV[2] order id
--
-- Returns 1 paid now; 2 paid before; 0 not held any more (expired or
-- cancelled: the money must go back); -1 the sale is being rebuilt (try
-- again shortly); -2 Redis does not know the reservation (lost with the
-- sale, or past retention: Postgres must say).
if redis.call('EXISTS', KEYS[6]) == 1 then return -1 end
local h = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'account', 'sku', 'idem')
if not h[1] then return -2 end
if h[1] == 'paid' then return 2 end
if h[1] ~= 'held' then return 0 end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[5], '*', 'kind', 'pay', 'res', ARGV[1], 'account', h[3],
  'sku', h[4], 'idem', h[5], 'expires_ms', h[2], 'at_ms', string.format('%.0f', now))
redis.call('HINCRBY', KEYS[2], 'held', -1)
redis.call('HINCRBY', KEYS[2], 'sold', 1)
redis.call('HSET', KEYS[1], 'status', 'paid', 'order', ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('HGET', KEYS[3], 'res') == ARGV[1] then
  redis.call('HSET', KEYS[3], 'state', 'paid')
end
return 1
