-- join.lua: give each account of a batch its place in a sale's line, or the
-- place it already has. Before the start (by Redis TIME) a join takes the next
-- pre-queue index, to be shuffled at the start; after it, the next position
-- behind the whole pre-queue, which no longer grows. No counter passes its
-- durable ceiling (the line hash): the edge raises a ceiling in the origin's
-- copy before it raises it here, so after Redis loses the line, restoring
-- each counter to its ceiling hands no place out twice.
--
-- KEYS[1] pre counter  KEYS[2] post counter  KEYS[3] places hash
-- KEYS[4] line hash (epoch, pre_ceiling, post_ceiling)
-- ARGV[1] sale start (unix ms)  ARGV[2..] accounts (at most a few thousand:
-- they are unpacked onto Lua's stack)
--
-- Returns one value per account: "p<i>" (pre-queue index i, 1-based),
-- "<position>" (1-based), or "w" (no place: the counter is at its ceiling;
-- ask again once it is raised); then seven values: the queue length, the pre
-- counter, its ceiling, the post counter, its ceiling, 1 before the start
-- (0 after), and the line's epoch (a new one after every restore: counters
-- read across two epochs say nothing of the join rate). codes.go names the
-- codes.
-- Fails with LINE_LOST when the line's state is not all there (Redis lost
-- it), or when the line was last known good in another Redis history (its
-- replication id is not this Redis's: a replica that may have lagged was
-- promoted, or a restart reloaded a file that may miss the last writes):
-- nothing is handed out until the edge restores it from the origin.
--
-- The batch costs the same handful of calls however many accounts it carries:
-- one HMGET reads every known place, one INCRBY numbers the new accounts in
-- the order they come, one HSET stores them. An account that appears twice in
-- the batch gets one place.
local pre_key, post_key, places, line_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local starts = tonumber(ARGV[1])
local n = #ARGV - 1 -- accounts in the batch
local function account(i) return ARGV[1 + i] end -- i: 1..n

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local line = redis.call('HMGET', line_key, 'epoch', 'pre_ceiling', 'post_ceiling', 'replid')
local pre_s = redis.call('GET', pre_key)
local post_s = redis.call('GET', post_key)
if not line[1] or not pre_s or not post_s then
  return redis.error_reply('LINE_LOST the line of this sale is not in Redis; restore it from the origin')
end
if line[4] then
  local ok, info = pcall(redis.call, 'INFO', 'replication')
  local replid = ok and string.match(info, 'master_replid:(%x+)')
  if replid and replid ~= line[4] then
    return redis.error_reply('LINE_LOST this Redis took over from another and may have lost writes to the line; restore it from the origin')
  end
end
local pre = tonumber(pre_s)
local post = tonumber(post_s)
local pre_ceiling = tonumber(line[2] or '0')
local post_ceiling = tonumber(line[3] or '0')
local before = now < starts

local out = redis.call('HMGET', places, unpack(ARGV, 2)) -- every account's place
local first = {} -- account -> index of its first new occurrence in the batch
local fresh = {} -- indexes of the accounts that need a place, in order
for i = 1, n do
  if not out[i] then
    local a = account(i)
    if not first[a] then
      first[a] = i
      fresh[#fresh + 1] = i
    end
  end
end
local given = 0 -- how many of fresh get a place, in their order
if #fresh > 0 then
  if before then
    given = math.max(math.min(#fresh, pre_ceiling - pre), 0)
    if given > 0 then
      local base = redis.call('INCRBY', pre_key, given) - given
      pre = base + given
      for k = 1, given do
        out[fresh[k]] = 'p' .. (base + k)
      end
    end
  else
    given = math.max(math.min(#fresh, post_ceiling - post), 0)
    if given > 0 then
      local base = redis.call('INCRBY', post_key, given) - given
      post = base + given
      for k = 1, given do
        out[fresh[k]] = tostring(pre + base + k)
      end
    end
  end
  if given > 0 then
    local kv = {}
    for k = 1, given do
      kv[#kv + 1] = account(fresh[k])
      kv[#kv + 1] = out[fresh[k]]
    end
    redis.call('HSET', places, unpack(kv))
  end
  for k = given + 1, #fresh do
    out[fresh[k]] = 'w'
  end
end
for i = 1, n do
  if not out[i] then
    out[i] = out[first[account(i)]]
  end
end
local phase = 0
if before then phase = 1 end
out[n + 1] = tostring(pre + post)
out[n + 2] = tostring(pre)
out[n + 3] = tostring(pre_ceiling)
out[n + 4] = tostring(post)
out[n + 5] = tostring(post_ceiling)
out[n + 6] = tostring(phase)
out[n + 7] = line[1]
return out
