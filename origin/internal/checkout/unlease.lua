-- unlease.lua: delete a key only if it still holds the caller's value: the
-- writer lease (value: the consumer name) or the rebuilding flag (value: the
-- rebuild's token), so nobody clears what another has set since.
--
-- KEYS[1] the key
-- ARGV[1] the caller's value
--
-- Returns 1 given up, 0 not held by the caller.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
