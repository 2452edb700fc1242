-- unlease.lua: delete a key only if it still holds the caller's value: the
-- writer lease (value: the consumer name) or the rebuilding flag (value: the
-- rebuild's token), so nobody clears what another has set since.
--
-- KEYS[1] the key
-- ARGV[1] the caller's value
--
-- Returns (codes.go names them) 1 given up, 0 not held by the caller.
local key = KEYS[1]
local value = ARGV[1]

if redis.call('GET', key) == value then
  redis.call('DEL', key)
  return 1
end
return 0
