#!/bin/sh
# Writes this pod's redis.conf and sentinel.conf into /conf (an emptyDir: Sentinel rewrites its file).
# The primary is whatever the other pods' Sentinels say it is now; when none answers (the first start),
# redis-0. Every pod announces its stable DNS name, so a rescheduled pod keeps its identity.
#
# Three passwords: the default user's (flashgate-redis redis-password: the origins, the replicas, the
# Sentinels), the edges' user "edge" (flashgate-edge-redis password; limited to the line's keys by
# /scripts/redis-edge.acl, its keys under KEY_PREFIX, the binaries' FLASHGATE_REDIS_PREFIX), and the
# Sentinels' own (flashgate-redis sentinel-password). Each is required: an empty one stops the pod here.
set -eu
domain="redis.${POD_NAMESPACE}.svc.cluster.local"
self="${POD_NAME}.${domain}"
pw="$(cat /run/secrets/redis/redis-password)"
spw="$(cat /run/secrets/redis/sentinel-password)"
epw="$(cat /run/secrets/redis-edge/password)"
fail() {
	echo "redis-init: $*" >&2
	exit 1
}
[ -n "$pw" ] || fail "redis-password (Secret flashgate-redis) is empty"
[ -n "$spw" ] || fail "sentinel-password (Secret flashgate-redis) is empty: the Sentinels require a password"
[ -n "$epw" ] || fail "password (Secret flashgate-edge-redis) is empty: the edges' Redis user needs one"
[ "$epw" != "$pw" ] || fail "the edges' Redis password is the default user's: give the edges one of their own"
case "${KEY_PREFIX-}" in
*[!A-Za-z0-9:_.-]*) fail "KEY_PREFIX (FLASHGATE_REDIS_PREFIX) may hold letters, digits and : _ . - only" ;;
esac
# The edges' rules: the one line of redis-edge.acl that is not a comment, with its @PREFIX@ filled in.
edge_rules="$(grep -v -e '^#' -e '^[[:space:]]*$' /scripts/redis-edge.acl | sed "s/@PREFIX@/${KEY_PREFIX-}/g")"
[ "$(printf '%s\n' "$edge_rules" | wc -l)" -eq 1 ] && [ -n "$edge_rules" ] || fail "redis-edge.acl must hold one line of rules"
edge_hash="$(printf '%s' "$epw" | sha256sum | cut -d ' ' -f 1)"

master=""
for i in 0 1 2; do
	peer="redis-${i}.${domain}"
	[ "$peer" = "$self" ] && continue
	addr="$(REDISCLI_AUTH="$spw" timeout 3 redis-cli -h "$peer" -p 26379 sentinel get-master-addr-by-name "$MASTER_NAME" 2>/dev/null | head -n 1 || true)"
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
user edge on #${edge_hash} ${edge_rules}
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
# Clients (the binaries, redis-init.sh) and the other Sentinels alike authenticate with it.
requirepass ${spw}
CONF
echo "redis-init: ${self}: primary is ${master}"
