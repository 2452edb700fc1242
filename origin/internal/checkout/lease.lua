-- lease.lua: take or renew the lease that makes one order writer the only
-- reader of a sale's intents stream, so intents are applied in stream order.
--
-- KEYS[1] lease key
-- ARGV[1] consumer name  ARGV[2] lease ttl (ms)
--
-- Returns (codes.go names them) 2 taken (it was free), 1 renewed (the
-- caller held it), 0 held by another writer.
local lease = KEYS[1]
local consumer, ttl_ms = ARGV[1], ARGV[2]

local holder = redis.call('GET', lease)
if not holder then
  redis.call('SET', lease, consumer, 'PX', ttl_ms)
  return 2
end
if holder == consumer then
  redis.call('PEXPIRE', lease, ttl_ms)
  return 1
end
return 0
