-- cancel.lua: drop a hold that Postgres refused.
-- When Postgres had no unit for it, Redis had counted a unit that does not
-- exist: the hold goes and the unit is not returned to available (the ledger
-- shows the difference until a rebuild). When Postgres refused it because the
-- account already has a live reservation, the unit is real and goes back.
-- No intent is written: Postgres recorded the refusal itself.
--
-- KEYS[1] reservation hash  KEYS[2] inventory hash  KEYS[3] account hash
-- KEYS[4] holds zset
-- ARGV[1] reservation id    ARGV[2] 1 to return the unit to available, else 0
--
-- Returns 1 cancelled; 0 not held (already released, paid or cancelled).
if redis.call('HGET', KEYS[1], 'status') ~= 'held' then return 0 end
redis.call('HINCRBY', KEYS[2], 'held', -1)
if ARGV[2] == '1' then redis.call('HINCRBY', KEYS[2], 'available', 1) end
redis.call('HSET', KEYS[1], 'status', 'cancelled')
redis.call('ZREM', KEYS[4], ARGV[1])
-- The account may buy again; its burned tokens and idempotency keys stay.
if redis.call('HGET', KEYS[3], 'res') == ARGV[1] then
  redis.call('HDEL', KEYS[3], 'res', 'state')
end
return 1
