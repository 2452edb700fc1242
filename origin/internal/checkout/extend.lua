-- extend.lua: a payment has started. Tie the hold to its order and push its
-- expiry out, once, by a grace, so a shopper paying slowly is not cut off
-- mid-payment. Asking again changes nothing. A hold already due (its
-- expiry passed, the sweeper not there yet) is not revived.
--
-- KEYS[1] reservation hash  KEYS[2] holds zset
-- KEYS[3] rebuilding flag: nothing changes while the sale is rebuilt
-- ARGV[1] reservation id    ARGV[2] order id    ARGV[3] grace (ms)
--
-- Returns {code, expires (unix ms), status}, codes named in codes.go:
--   1 extended now; 2 extended before; 0 not held (status says what it
--   is: paid, expired, cancelled, or '' when Redis does not know the
--   reservation); -1 the sale is being rebuilt (try again shortly).
local reservation, holds, rebuilding = KEYS[1], KEYS[2], KEYS[3]
local id, order, grace_ms = ARGV[1], ARGV[2], ARGV[3]

if redis.call('EXISTS', rebuilding) == 1 then return {-1, 0, ''} end
local h = redis.call('HMGET', reservation, 'status', 'expires_ms', 'extended')
if h[1] ~= 'held' then return {0, 0, h[1] or ''} end
if h[3] then return {2, tonumber(h[2]), 'held'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(h[2]) <= now then return {0, 0, 'expired'} end
local expires = tonumber(h[2]) + tonumber(grace_ms)
local expires_s = string.format('%.0f', expires)
redis.call('HSET', reservation, 'expires_ms', expires_s, 'extended', '1', 'order', order)
redis.call('ZADD', holds, 'XX', expires_s, id)
return {1, expires, 'held'}
