-- reserve.lua: take one unit of a SKU for an account, or say why not.
-- Duplicates are checked before stock, and the intent is the first write, so
-- a script refused at its first write (maxmemory) leaves nothing behind and a
-- unit is never taken without its intent.
--
-- KEYS[1] inventory hash   KEYS[2] account hash   KEYS[3] token (jti) key
-- KEYS[4] idempotency key  KEYS[5] new reservation hash
-- KEYS[6] holds zset       KEYS[7] intents stream
-- KEYS[8] rebuilding flag (set while the sale is rebuilt from Postgres)
-- ARGV[1] new reservation id  ARGV[2] account  ARGV[3] sku
-- ARGV[4] idempotency key     ARGV[5] hold ttl (ms)
-- ARGV[6] retention of per-shopper keys (ms)
--
-- Returns {code, reservation id, expires (unix ms)}:
--   1 created; 2 existing (same token, same idempotency key, or the account's
--   live hold); 3 limit reached (the account already bought); 4 unknown sku;
--   5 sold out; 6 rebuilding (try again shortly).
if redis.call('EXISTS', KEYS[8]) == 1 then return {6, '', 0} end
local prior = redis.call('GET', KEYS[3])
if prior then return {2, prior, 0} end
prior = redis.call('GET', KEYS[4])
if prior then return {2, prior, 0} end

local live = redis.call('HMGET', KEYS[2], 'res', 'state')
if live[1] then
  if live[2] == 'held' then return {2, live[1], 0} end
  return {3, live[1], 0}
end

local available = redis.call('HGET', KEYS[1], 'available')
if not available then return {4, '', 0} end
if tonumber(available) <= 0 then return {5, '', 0} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ARGV[5])
local now_s = string.format('%.0f', now)
local expires_s = string.format('%.0f', expires)

redis.call('XADD', KEYS[7], '*', 'kind', 'reserve', 'res', ARGV[1], 'account', ARGV[2],
  'sku', ARGV[3], 'idem', ARGV[4], 'expires_ms', expires_s, 'at_ms', now_s)
redis.call('HINCRBY', KEYS[1], 'available', -1)
redis.call('HINCRBY', KEYS[1], 'held', 1)
redis.call('HSET', KEYS[5], 'account', ARGV[2], 'sku', ARGV[3], 'status', 'held',
  'expires_ms', expires_s, 'created_ms', now_s, 'idem', ARGV[4])
redis.call('PEXPIRE', KEYS[5], ARGV[6])
redis.call('ZADD', KEYS[6], expires_s, ARGV[1])
redis.call('HSET', KEYS[2], 'res', ARGV[1], 'state', 'held')
redis.call('PEXPIRE', KEYS[2], ARGV[6])
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[6])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[6])
return {1, ARGV[1], expires}
