-- load.lua: put a sale's stock into Redis, or refuse when Redis already
-- holds other figures for it. SKUs already present are left as they are
-- (Redis runs ahead of Postgres while intents are pending) once their total
-- matches and their counters add up.
--
-- KEYS[i]  inventory hash of SKU i
-- ARGV[4i-3..4i] total, available, held, sold of SKU i (from Postgres)
--
-- Returns {1, n loaded} or {0, i} when SKU i holds other figures.
for i, key in ipairs(KEYS) do
  local have = redis.call('HMGET', key, 'total', 'available', 'held', 'sold')
  if have[1] then
    local total = tonumber(have[1])
    local sum = tonumber(have[2]) + tonumber(have[3]) + tonumber(have[4])
    if total ~= tonumber(ARGV[4 * i - 3]) or sum ~= total then
      return {0, i}
    end
  end
end
local loaded = 0
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'total', ARGV[4 * i - 3], 'available', ARGV[4 * i - 2],
      'held', ARGV[4 * i - 1], 'sold', ARGV[4 * i])
    loaded = loaded + 1
  end
end
return {1, loaded}
