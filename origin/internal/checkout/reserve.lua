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
-- KEYS[7] sale's meta hash: epoch (written when the sale is loaded or
--         rebuilt), seq (reserves granted in that epoch)
-- ARGV[1] new reservation id  ARGV[2] account  ARGV[3] sku
-- ARGV[4] idempotency key     ARGV[5] admission token id (jti)
-- ARGV[6] hold ttl (ms)       ARGV[7] retention of per-shopper keys (ms)
-- ARGV[8] holds an account may take in the sale, counting expired and
--         cancelled ones (0: no cap)
--
-- Returns {code, reservation id, expires (unix ms)}, and for code 1 also
-- {..., seq, epoch, created (unix ms)}; for code 2, when the reservation's
-- hash is still there, {..., seq, epoch, created (unix ms), status, account,
-- sku, idempotency key, token id, order} as the hash holds them (seq 0 and
-- epoch '' for a hold numbered before the journal; '' for a field not set),
-- so a repeat is answered without another round trip. codes.go names the
-- codes and reserve.go the positions:
--   1 created; 2 existing (same token, same idempotency key, or the account's
--   live hold); 3 limit reached (the account already bought); 4 unknown sku;
--   5 sold out; 6 hold limit reached (the account has taken ARGV[8] holds,
--   and none is live); -1 rebuilding (try again shortly; also when the sale has no
--   epoch: this Redis lost the sale's state and must not grant from it).
--   -1 means "rebuilding" in every script that checks the flag.
--
-- The created hold is numbered: seq counts the reserves granted in this
-- epoch, and the origin journals (epoch, seq) in Postgres before it answers,
-- so a Redis that comes back behind the journal is seen to have lost writes.
local inventory, account, reservation = KEYS[1], KEYS[2], KEYS[3]
local holds, intents, rebuilding, meta = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local id, acct, sku, idem, jti = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl_ms, retention_ms, max_holds = ARGV[6], ARGV[7], tonumber(ARGV[8])

-- existing answers code 2 for reservation rid. Its hash's key is KEYS[3]
-- with rid in place of the new id: keys.go ends a reservation's key with
-- its id, and both share the sale's hash tag, so they share a slot.
local function existing(rid)
  local key = string.sub(reservation, 1, #reservation - #id) .. rid
  local r = redis.call('HMGET', key, 'expires_ms', 'seq', 'epoch', 'created_ms',
    'status', 'account', 'sku', 'idem', 'jti', 'order')
  if not r[6] then return {2, rid, 0} end
  return {2, rid, tonumber(r[1]) or 0, tonumber(r[2]) or 0, r[3] or '', tonumber(r[4]) or 0,
    r[5] or '', r[6], r[7] or '', r[8] or '', r[9] or '', r[10] or ''}
end

if redis.call('EXISTS', rebuilding) == 1 then return {-1, '', 0} end
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then return {-1, '', 0} end
local token_field, idem_field = 't:' .. jti, 'i:' .. idem
local a = redis.call('HMGET', account, token_field, idem_field, 'res', 'state', 'holds')
if a[1] then return existing(a[1]) end
if a[2] then return existing(a[2]) end
if a[3] then
  if a[4] == 'held' then return existing(a[3]) end
  return {3, a[3], 0}
end
-- Each hold that ran out may be taken again, but not for ever: an account
-- must not keep the stock to itself by holding it over and over.
local holds_taken = tonumber(a[5]) or 0
if max_holds > 0 and holds_taken >= max_holds then return {6, '', 0} end

local available = redis.call('HGET', inventory, 'available')
if not available then return {4, '', 0} end
if tonumber(available) <= 0 then return {5, '', 0} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ttl_ms)
local now_s = string.format('%.0f', now)
local expires_s = string.format('%.0f', expires)

redis.call('XADD', intents, '*', 'kind', 'reserve', 'res', id, 'account', acct,
  'sku', sku, 'idem', idem, 'expires_ms', expires_s, 'at_ms', now_s)
local seq = redis.call('HINCRBY', meta, 'seq', 1)
-- The moments the count first and last reached zero are kept: sold-out
-- news is timed from them, at the source.
if redis.call('HINCRBY', inventory, 'available', -1) == 0 then
  redis.call('HSETNX', inventory, 'first_zero_ms', now_s)
  redis.call('HSET', inventory, 'zero_ms', now_s)
end
redis.call('HINCRBY', inventory, 'held', 1)
redis.call('HSET', reservation, 'account', acct, 'sku', sku, 'status', 'held',
  'expires_ms', expires_s, 'created_ms', now_s, 'idem', idem, 'jti', jti, 'epoch', epoch, 'seq', seq)
redis.call('PEXPIRE', reservation, retention_ms)
redis.call('ZADD', holds, expires_s, id)
redis.call('HSET', account, 'res', id, 'state', 'held', token_field, id, idem_field, id,
  'holds', string.format('%.0f', holds_taken + 1))
redis.call('PEXPIRE', account, retention_ms)
return {1, id, expires, seq, epoch, now}
