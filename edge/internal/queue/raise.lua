-- raise.lua: raise a sale's ceilings in Redis after the origin's durable
-- copy has them, so joins and the cursor may go that far. A ceiling never
-- falls. When Redis has lost the line it does nothing: the restore takes
-- the ceilings from the origin, which has these already.
--
-- KEYS[1] line hash
-- ARGV[1] pre ceiling  ARGV[2] post ceiling  ARGV[3] serving ceiling
--   (each '' to leave it)
--
-- Returns 1 when the line was there, 0 when it was lost.
if not redis.call('HGET', KEYS[1], 'epoch') then
  return 0
end
local names = {'pre_ceiling', 'post_ceiling', 'serving_ceiling'}
local cur = redis.call('HMGET', KEYS[1], unpack(names))
for i, name in ipairs(names) do
  if ARGV[i] ~= '' and tonumber(ARGV[i]) > tonumber(cur[i] or '0') then
    redis.call('HSET', KEYS[1], name, ARGV[i])
  end
end
return 1
