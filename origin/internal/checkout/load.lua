-- load.lua: put a sale's stock into Redis, or refuse when Redis already
-- holds other figures for it. SKUs already present are left as they are
-- (Redis runs ahead of Postgres while intents are pending) once their total
-- matches and their counters add up. The sale's epoch is set if it has none;
-- the one Redis holds is returned, for the origin to record.
--
-- KEYS[1]    the sale's meta hash (epoch, seq)
-- KEYS[1+i]  inventory hash of SKU i
-- ARGV[1]    epoch to set when the sale has none
-- ARGV[4i-2..4i+1] total, available, held, sold of SKU i (from Postgres)
--
-- Returns {1, n loaded, epoch} or {0, i, ''} when SKU i holds other figures
-- (codes.go names the codes).
local meta, epoch = KEYS[1], ARGV[1]
local n = #KEYS - 1
local function inventory(i) return KEYS[1 + i] end
local function arg(i, k) return ARGV[4 * i - 3 + k] end -- k: 1 total .. 4 sold
for i = 1, n do
  local have = redis.call('HMGET', inventory(i), 'total', 'available', 'held', 'sold')
  if have[1] then
    local total = tonumber(have[1])
    local sum = tonumber(have[2]) + tonumber(have[3]) + tonumber(have[4])
    if total ~= tonumber(arg(i, 1)) or sum ~= total then
      return {0, i, ''}
    end
  end
end
local loaded = 0
for i = 1, n do
  local key = inventory(i)
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'total', arg(i, 1), 'available', arg(i, 2), 'held', arg(i, 3), 'sold', arg(i, 4))
    loaded = loaded + 1
  end
end
if redis.call('HSETNX', meta, 'epoch', epoch) == 1 then
  redis.call('HSET', meta, 'seq', 0)
end
return {1, loaded, redis.call('HGET', meta, 'epoch')}
