-- pay.lua: the shopper paid. A held unit becomes sold, exactly once: the
-- webhook, its duplicates and the reconciler may all call it.
-- Like reserve.lua, the intent is the first write.
--
-- KEYS[1] reservation hash  KEYS[2] inventory hash  KEYS[3] account hash
-- KEYS[4] holds zset        KEYS[5] intents stream
-- KEYS[6] rebuilding flag: nothing changes while the sale is rebuilt
-- ARGV[1] reservation id    ARGV[2] order id
--
-- Returns (codes.go names them) 1 paid now; 2 paid before; 0 not held any
-- more (expired or cancelled: the money must go back); -1 the sale is being
-- rebuilt (try again shortly); -2 Redis does not know the reservation (lost
-- with the sale, or past retention: Postgres must say).
local reservation, inventory, account = KEYS[1], KEYS[2], KEYS[3]
local holds, intents, rebuilding = KEYS[4], KEYS[5], KEYS[6]
local id, order = ARGV[1], ARGV[2]

if redis.call('EXISTS', rebuilding) == 1 then return -1 end
local h = redis.call('HMGET', reservation, 'status', 'expires_ms', 'account', 'sku', 'idem')
if not h[1] then return -2 end
if h[1] == 'paid' then return 2 end
if h[1] ~= 'held' then return 0 end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', intents, '*', 'kind', 'pay', 'res', id, 'account', h[3],
  'sku', h[4], 'idem', h[5], 'expires_ms', h[2], 'at_ms', string.format('%.0f', now))
redis.call('HINCRBY', inventory, 'held', -1)
redis.call('HINCRBY', inventory, 'sold', 1)
redis.call('HSET', reservation, 'status', 'paid', 'order', order)
redis.call('ZREM', holds, id)
if redis.call('HGET', account, 'res') == id then
  redis.call('HSET', account, 'state', 'paid')
end
return 1
