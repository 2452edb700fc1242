#!/bin/sh
# Writes this pod's redis.conf and sentinel.conf into /conf (an emptyDir: Sentinel rewrites its file).
# The primary is whatever the other pods' Sentinels say it is now; when none answers (the first start),
# redis-0. Every pod announces its stable DNS name, so a rescheduled pod keeps its identity.
set -eu
domain="redis.${POD_NAMESPACE}.svc.cluster.local"
self="${POD_NAME}.${domain}"
pw="$(cat /run/secrets/redis/redis-password)"
spw="$(cat /run/secrets/redis/sentinel-password)"

master=""
for i in 0 1 2; do
	peer="redis-${i}.${domain}"
	[ "$peer" = "$self" ] && continue
	if [ -n "$spw" ]; then export REDISCLI_AUTH="$spw"; fi
	addr="$(timeout 3 redis-cli -h "$peer" -p 26379 sentinel get-master-addr-by-name "$MASTER_NAME" 2>/dev/null | head -n 1 || true)"
	unset REDISCLI_AUTH
	case "$addr" in
	"" | *ERR* | *NOAUTH*) ;;
	*) master="$addr"; break ;;
	esac
done
[ -n "$master" ] || master="redis-0.${domain}"

cat > /conf/redis.conf <<CONF
port 6379
bind * -::*
dir /data
# The edge's line keys have no expiry: an evicted one reads as a lost line (docs/OPERATIONS.md).
maxmemory ${MAXMEMORY}
maxmemory-policy noeviction
# A restarted Redis comes back with its data, so nothing needs rebuilding (docs/OPERATIONS.md "Durability").
appendonly yes
appendfsync everysec
requirepass ${pw}
masterauth ${pw}
replica-announce-ip ${self}
CONF
if [ "$master" != "$self" ]; then
	echo "replicaof ${master} 6379" >> /conf/redis.conf
fi

cat > /conf/sentinel.conf <<CONF
port 26379
bind * -::*
dir /tmp
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip ${self}
sentinel monitor ${MASTER_NAME} ${master} 6379 2
sentinel auth-pass ${MASTER_NAME} ${pw}
sentinel down-after-milliseconds ${MASTER_NAME} 5000
sentinel failover-timeout ${MASTER_NAME} 60000
sentinel parallel-syncs ${MASTER_NAME} 1
CONF
if [ -n "$spw" ]; then
	echo "requirepass ${spw}" >> /conf/sentinel.conf
fi
echo "redis-init: ${self}: primary is ${master}"
