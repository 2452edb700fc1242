-- raise.lua: raise a sale's ceilings in Redis after the origin's durable
-- copy has them, so joins and the cursor may go that far. A ceiling never
-- falls. When Redis has lost the line it does nothing: the restore takes
-- the ceilings from the origin, which has these already.
--
-- KEYS[1] line hash
-- ARGV[1] pre ceiling  ARGV[2] post ceiling  ARGV[3] serving ceiling
--   (each '' to leave it)
--
-- Returns 1: raised (codes.go names it). Fails with LINE_LOST when the line
-- is not there (Redis lost it), as every script that needs the line does.
local line_key = KEYS[1]
local pre_ceiling, post_ceiling, serving_ceiling = ARGV[1], ARGV[2], ARGV[3]

if not redis.call('HGET', line_key, 'epoch') then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
local names = {'pre_ceiling', 'post_ceiling', 'serving_ceiling'}
local want = {pre_ceiling, post_ceiling, serving_ceiling}
local cur = redis.call('HMGET', line_key, unpack(names))
for i, name in ipairs(names) do
  if want[i] ~= '' and tonumber(want[i]) > tonumber(cur[i] or '0') then
    redis.call('HSET', line_key, name, want[i])
  end
end
return 1
