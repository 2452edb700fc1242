-- replid.lua: INFO replication of the server that holds a sale, whose
-- master_replid tells a failover or a restart. A script, so that it runs
-- where the sale's keys live: on Redis Cluster the node of their slot, on a
-- single server or behind Sentinels the primary.
--
-- KEYS[1] the sale's meta hash (only its slot matters; it is not read)
--
-- Returns INFO replication's text.
local meta = KEYS[1]
return redis.call('INFO', 'replication')
