-- reserve.lua: take one unit of a SKU for an account, or say why not.
-- Duplicates are checked before stock, and the intent is the first write, so
-- a script refused at its first write (maxmemory) leaves nothing behind and a
-- unit is never taken without its intent. The burned token and the
-- idempotency key are fields of the account's hash: one key per shopper,
-- and no idempotency key of one account can meet another's.
--
-- KEYS[1] inventory hash   KEYS[2] account hash   KEYS[3] new reservation hash
-- KEYS[4] holds zset       KEYS[5] intents stream
-- KEYS[6] rebuilding flag (set while the sale is rebuilt from Postgres)
-- ARGV[1] new reservation id  ARGV[2] account  ARGV[3] sku
-- ARGV[4] idempotency key     ARGV[5] admission token id (jti)
-- ARGV[6] hold ttl (ms)       ARGV[7] retention of per-shopper keys (ms)
--
-- Returns {code, reservation id, expires (unix ms)}:
--   1 created; 2 existing (same token, same idempotency key, or the account's
--   live hold); 3 limit reached (the account already bought); 4 unknown sku;
--   5 sold out; 6 rebuilding (try again shortly).
if redis.call('EXISTS', KEYS[6]) == 1 then return {6, '', 0} end
local token_field, idem_field = 't:' .. ARGV[5], 'i:' .. ARGV[4]
local a = redis.call('HMGET', KEYS[2], token_field, idem_field, 'res', 'state')
if a[1] then return {2, a[1], 0} end
if a[2] then return {2, a[2], 0} end
if a[3] then
  if a[4] == 'held' then return {2, a[3], 0} end
  return {3, a[3], 0}
end

local available = redis.call('HGET', KEYS[1], 'available')
if not available then return {4, '', 0} end
if tonumber(available) <= 0 then return {5, '', 0} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ARGV[6])
local now_s = string.format('%.0f', now)
local expires_s = string.format('%.0f', expires)

redis.call('XADD', KEYS[5], '*', 'kind', 'reserve', 'res', ARGV[1], 'account', ARGV[2],
  'sku', ARGV[3], 'idem', ARGV[4], 'expires_ms', expires_s, 'at_ms', now_s)
redis.call('HINCRBY', KEYS[1], 'available', -1)
redis.call('HINCRBY', KEYS[1], 'held', 1)
redis.call('HSET', KEYS[3], 'account', ARGV[2], 'sku', ARGV[3], 'status', 'held',
  'expires_ms', expires_s, 'created_ms', now_s, 'idem', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
redis.call('ZADD', KEYS[4], expires_s, ARGV[1])
redis.call('HSET', KEYS[2], 'res', ARGV[1], 'state', 'held', token_field, ARGV[1], idem_field, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return {1, ARGV[1], expires}
