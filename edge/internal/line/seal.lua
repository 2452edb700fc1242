-- seal.lua: record in Redis the pre-queue's draw size, once the origin has
-- it (the first edge to seal wins there). Until it is here the cursor does
-- not admit and the edge shows no drawn position: the draw permutes 1..size,
-- and a size Redis could lose and restore differently would move every
-- pre-queue shopper.
--
-- KEYS[1] line hash  KEYS[2] pre counter
-- ARGV[1] draw size, as the origin holds it
--
-- Returns the draw size Redis holds afterwards.
-- Fails with LINE_LOST when the line is not there (Redis lost it): the
-- restore brings the size back from the origin.
local line_key, pre_key = KEYS[1], KEYS[2]
local draw_size = ARGV[1]

if not redis.call('HGET', line_key, 'epoch') then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
redis.call('HSETNX', line_key, 'draw_size', draw_size)
local size = tonumber(redis.call('HGET', line_key, 'draw_size'))
-- Later positions are numbered after the pre counter: never below the draw.
if tonumber(redis.call('GET', pre_key) or '0') < size then
  redis.call('SET', pre_key, string.format('%.0f', size))
end
return size
