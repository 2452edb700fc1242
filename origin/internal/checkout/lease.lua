-- lease.lua: take or renew the lease that makes one order writer the only
-- reader of a sale's intents stream, so intents are applied in stream order.
--
-- KEYS[1] lease key
-- ARGV[1] consumer name  ARGV[2] lease ttl (ms)
--
-- Returns 2 taken (it was free), 1 renewed (the caller held it), 0 held by
-- another writer.
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
