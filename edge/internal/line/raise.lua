-- raise.lua: raise a sale's ceilings in Redis after the origin's durable
-- copy has them, so joins and the cursor may go that far. A join ceiling
-- never falls here. The serving ceiling is raised only while the settings
-- version it was asked under (ARGV[4]) is the one Redis holds: a raise
-- sized for settings since replaced (a pause, a lower rate) would lift the
-- ceiling the new settings brought down (settings.lua), and the origin,
-- which took the raise at that version only, would not cover it. When
-- Redis has lost the line it does nothing: the restore takes the ceilings
-- from the origin, which has these already.
--
-- KEYS[1] line hash  KEYS[2] cursor hash (settings_version)
-- ARGV[1] pre ceiling  ARGV[2] post ceiling  ARGV[3] serving ceiling
--   (each '' to leave it)  ARGV[4] the settings version of the serving
--   ceiling ('' with no serving ceiling)
--
-- Returns 1: raised (codes.go names it), or 2: the join ceilings raised and
-- the serving ceiling left, its settings replaced. Fails with LINE_LOST
-- when the line is not there (Redis lost it), as every script that needs
-- the line does.
local line_key, cursor = KEYS[1], KEYS[2]
local pre_ceiling, post_ceiling, serving_ceiling = ARGV[1], ARGV[2], ARGV[3]
local version = ARGV[4]

if not redis.call('HGET', line_key, 'epoch') then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
local outcome = 1
if serving_ceiling ~= '' and tonumber(redis.call('HGET', cursor, 'settings_version') or '0') ~= tonumber(version) then
  serving_ceiling, outcome = '', 2
end
local names = {'pre_ceiling', 'post_ceiling', 'serving_ceiling'}
local want = {pre_ceiling, post_ceiling, serving_ceiling}
local cur = redis.call('HMGET', line_key, unpack(names))
for i, name in ipairs(names) do
  if want[i] ~= '' and tonumber(want[i]) > tonumber(cur[i] or '0') then
    redis.call('HSET', line_key, name, want[i])
  end
end
return outcome
