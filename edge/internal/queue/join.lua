-- join.lua: give each account of a batch its place in a sale's line, or the
-- place it already has. Before the start (by Redis TIME) a join takes the next
-- pre-queue index, to be shuffled at the start; after it, the next position
-- behind the whole pre-queue, which no longer grows.
--
-- KEYS[1] pre counter  KEYS[2] post counter  KEYS[3] places hash
-- ARGV[1] sale start (unix ms)  ARGV[2..] accounts (at most a few thousand:
-- they are unpacked onto Lua's stack)
--
-- Returns one value per account: "p<i>" (pre-queue index i, 1-based) or
-- "<position>" (1-based), then the queue length as the last value.
--
-- The batch costs the same handful of calls however many accounts it carries:
-- one HMGET reads every known place, one INCRBY numbers the new accounts in
-- the order they come, one HSET stores them. An account that appears twice in
-- the batch gets one place. The pre counter does not move after the start, so
-- it is read once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts = tonumber(ARGV[1])
local n = #ARGV - 1
local out = redis.call('HMGET', KEYS[3], unpack(ARGV, 2))
local first = {} -- account -> index of its first new occurrence in the batch
local fresh = {} -- indexes of the accounts that need a place, in order
for i = 1, n do
  if not out[i] then
    local a = ARGV[i + 1]
    if not first[a] then
      first[a] = i
      fresh[#fresh + 1] = i
    end
  end
end
if #fresh > 0 then
  if now < starts then
    local base = redis.call('INCRBY', KEYS[1], #fresh) - #fresh
    for k, i in ipairs(fresh) do
      out[i] = 'p' .. (base + k)
    end
  else
    local pre = tonumber(redis.call('GET', KEYS[1]) or '0')
    local base = pre + redis.call('INCRBY', KEYS[2], #fresh) - #fresh
    for k, i in ipairs(fresh) do
      out[i] = tostring(base + k)
    end
  end
  local kv = {}
  for _, i in ipairs(fresh) do
    kv[#kv + 1] = ARGV[i + 1]
    kv[#kv + 1] = out[i]
  end
  redis.call('HSET', KEYS[3], unpack(kv))
end
for i = 1, n do
  if not out[i] then
    out[i] = out[first[ARGV[i + 1]]]
  end
end
local length = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(redis.call('GET', KEYS[2]) or '0')
out[n + 1] = tostring(length)
return out
