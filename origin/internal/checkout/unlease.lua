-- unlease.lua: give the writer lease up, if the caller still holds it.
--
-- KEYS[1] lease key
-- ARGV[1] consumer name
--
-- Returns 1 given up, 0 not held by the caller.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
