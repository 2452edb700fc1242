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
-- Returns (codes.go names them) 1 cancelled; 0 not held (already released,
-- paid or cancelled).
local reservation, inventory, account, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, return_unit = ARGV[1], ARGV[2]

if redis.call('HGET', reservation, 'status') ~= 'held' then return 0 end
redis.call('HINCRBY', inventory, 'held', -1)
-- A unit back on a sold-out SKU is kept (back_ms): the sale reopens then.
if return_unit == '1' and redis.call('HINCRBY', inventory, 'available', 1) == 1 then
  local t = redis.call('TIME')
  redis.call('HSET', inventory, 'back_ms', string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
end
redis.call('HSET', reservation, 'status', 'cancelled')
redis.call('ZREM', holds, id)
-- The account may buy again; its burned tokens and idempotency keys stay.
if redis.call('HGET', account, 'res') == id then
  redis.call('HDEL', account, 'res', 'state')
end
return 1
