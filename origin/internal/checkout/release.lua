-- release.lua: give an expired, unpaid hold's unit back, exactly once.
-- Any number of sweepers may call it for the same hold: only the call that
-- finds the hold still held and due changes anything.
--
-- KEYS[1] reservation hash  KEYS[2] inventory hash  KEYS[3] account hash
-- KEYS[4] holds zset        KEYS[5] intents stream
-- KEYS[6] rebuilding flag: nothing is released while the sale is rebuilt
-- ARGV[1] reservation id
--
-- Returns (codes.go names them) 1 released; 0 not held any more (dropped
-- from the index); 2 held but not due (its expiry was extended); -1 the
-- sale is being rebuilt (try again later).
local reservation, inventory, account = KEYS[1], KEYS[2], KEYS[3]
local holds, intents, rebuilding = KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]

if redis.call('EXISTS', rebuilding) == 1 then return -1 end
local h = redis.call('HMGET', reservation, 'status', 'expires_ms', 'account', 'sku', 'idem')
if h[1] ~= 'held' then
  redis.call('ZREM', holds, id)
  return 0
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(h[2]) > now then return 2 end

redis.call('XADD', intents, '*', 'kind', 'expire', 'res', id, 'account', h[3],
  'sku', h[4], 'idem', h[5], 'expires_ms', h[2], 'at_ms', string.format('%.0f', now))
redis.call('HINCRBY', inventory, 'held', -1)
-- A unit back on a sold-out SKU is kept (back_ms): the sale reopens then.
if redis.call('HINCRBY', inventory, 'available', 1) == 1 then
  redis.call('HSET', inventory, 'back_ms', string.format('%.0f', now))
end
redis.call('HSET', reservation, 'status', 'expired')
redis.call('ZREM', holds, id)
-- The account may buy again; its burned tokens and idempotency keys stay.
if redis.call('HGET', account, 'res') == id then
  redis.call('HDEL', account, 'res', 'state')
end
return 1
