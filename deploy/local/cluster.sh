#!/usr/bin/env bash
# `make run-cluster`: flashgate in the shape it is deployed in, on one machine, in the foreground until
# SIGINT/SIGTERM:
#
#   nginx (deploy/cdn's reference CDN configuration, upstream = both edges)
#     → edge1, edge2 → origin1, origin2 (edge1 → origin1, edge2 → origin2)
#     → a Redis primary with one replica and three Sentinels (quorum 2), followed through Sentinel by every binary;
#       the origins as Redis's default user, the edges as the user "edge", limited to the line's keys
#       (deploy/k8s/base/redis-edge.acl, as on Kubernetes), each with a password fresh for the run
#     → Postgres (services.sh's: the one on 127.0.0.1:5432 if it answers, else one of our own)
#   plus the sandbox payment gateway (its webhooks come in through nginx) and a demo sale (demosale.sh).
#
# As root (where `ip netns` works), every node runs in its own network namespace with its own address on a
# private test subnet that exists only inside the namespaces this script makes, joined by veth pairs to a bridge
# in the root namespace: cut a node off with `ip link set fgc-<node> down`. Elsewhere everything listens on
# 127.0.0.1, on ports from FLASHGATE_CLUSTER_PORT_BASE. docs/OPERATIONS.md ("Many nodes on one machine") has
# the addresses. On exit (Ctrl-C, TERM, FLASHGATE_RUN_THEN's end, a failed start) it stops every process it
# started, removes the namespaces, veths and bridge it made and the services services.sh started for it.
#
# Environment (all optional):
#   FLASHGATE_CLUSTER_NETNS=auto    1: namespaces (fails unless they work); 0: loopback ports; auto: 1 when root
#                                   and `ip netns add` works
#   FLASHGATE_CLUSTER_SUBNET=10.99.0   the namespaces' /24 (first three octets); the bridge is .1
#   FLASHGATE_CLUSTER_PORT_BASE=7000   loopback mode: nginx on BASE, the others from BASE+11 (see OPERATIONS.md);
#                                   two regions add the far nginx on BASE+1 and the link on BASE+81, BASE+82
#   FLASHGATE_CLUSTER_REGION_DELAY=   two regions (docs/REGIONS.md): a one-way delay such as 60ms puts edge2 and a
#                                   second nginx (BASE+1) in a far region, reaching the home region's Redis and
#                                   origin2 through delay proxies (bench/delayproxy) that add it each way; the home
#                                   nginx then fronts edge1 alone. Loopback ports only (auto picks them).
#   FLASHGATE_CLUSTER_REGION_JITTER=0ms  each chunk's delay is drawn from [delay, delay+jitter]
#   FLASHGATE_CLUSTER_DB=flashgate_cluster  the origins' Postgres database (created when missing): runs on other
#                                   ports beside each other need one each
#   FLASHGATE_CLUSTER_FAR_JOIN_PIPELINES=  edge2's FLASHGATE_JOIN_PIPELINES in the far region (default: as edge1's)
#   FLASHGATE_RUN_THEN="command"    run it once the cluster is up, then stop everything (its exit status is ours),
#                                   with what run.sh gives its command (FLASHGATE_DEMO_SALE_ID, FLASHGATE_CROWD_*,
#                                   FLASHGATE_USER_TOKEN_SECRET, FLASHGATE_GATEWAY_CONTROL_TOKEN, the admin tokens)
#                                   and FLASHGATE_CLUSTER_* naming every node (printed at start); the crowd
#                                   (bin/crowd) sends load to 127.0.0.1 only: give it FLASHGATE_CLUSTER_NETNS=0
#   FLASHGATE_DEMO_STARTS_IN=15     seconds from its creation to the demo sale's start
#   the secrets run.sh generates (admin tokens, token keys, dev user-token secret, gateway keys): generated when
#   unset; any other FLASHGATE_* setting (limits, rates) is passed to every binary as it is.
#
#   deploy/local/cluster.sh down    ends what a killed run left running (by the pids it recorded in
#                                   .data/cluster/*/pids) and removes its namespaces, veths and bridge
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# shellcheck source=lib.sh
. "$here/lib.sh"
is_root() { [[ "$(id -u)" -eq 0 ]]; }
have() { command -v "$1" >/dev/null 2>&1; }

command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
PATH="$PATH:/usr/sbin:/sbin"

ns_prefix=fgc-      # namespaces fgc-<node>; root-side veths fgc-<node>; bridge fgc-br0
bridge="${ns_prefix}br0"
nodes=(cdn edge1 edge2 origin1 origin2 redis1 redis2 sentinel1 sentinel2 sentinel3 gateway)

# remove_netns: every namespace, veth and the bridge named with our prefix (ours: nobody else uses it).
remove_netns() {
	local node
	for node in "${nodes[@]}"; do
		if [[ -n "${kill_leftovers:-}" ]] && ip netns list 2>/dev/null | grep -qw "$ns_prefix$node"; then
			# shellcheck disable=SC2046 # a list of pids
			kill -KILL $(ip netns pids "$ns_prefix$node" 2>/dev/null) 2>/dev/null || true
		fi
		if ip netns list 2>/dev/null | grep -qw "$ns_prefix$node"; then
			ip netns del "$ns_prefix$node" 2>/dev/null || log "could not remove namespace $ns_prefix$node"
		fi
		if ip link show "$ns_prefix$node" >/dev/null 2>&1; then
			ip link del "$ns_prefix$node" 2>/dev/null || true
		fi
	done
	if ip link show "$bridge" >/dev/null 2>&1; then
		ip link del "$bridge" 2>/dev/null || log "could not remove bridge $bridge"
	fi
}

# proc_start PID: the process's start time (field 22 of /proc/PID/stat), or "" where there is no /proc.
proc_start() { awk '{ print $22 }' "/proc/$1/stat" 2>/dev/null || true; }

if [[ "${1:-}" == "down" ]]; then
	for pids_file in "$root"/.data/cluster/*/pids; do
		[[ -f "$pids_file" ]] || continue
		while read -r pid started name; do
			if [[ -n "$started" && "$(proc_start "$pid")" == "$started" ]]; then
				log "ending $name (pid $pid), left by a killed run"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done <"$pids_file"
		rm -f "$pids_file"
	done
	if is_root && have ip; then
		kill_leftovers=1 # what a killed run left running in its namespaces
		remove_netns
	fi
	log "removed what a cluster run left behind (if anything)"
	exit 0
fi
[[ $# -eq 0 ]] || die "usage: cluster.sh [down]"

need() { # command package
	have "$1" && return 0
	if is_root && have apt-get; then
		apt_install "$2" || true
	fi
	have "$1" || die "$1 is not installed (Debian: apt-get install $2)"
}

for tool in go curl openssl; do
	have "$tool" || die "$tool is not installed"
done
need redis-server redis-server
need redis-cli redis-tools
need nginx nginx-light
need envsubst gettext-base

# --- the shape: namespaces or loopback ports --------------------------------------------------------------

netns_works() {
	is_root && have ip || return 1
	local probe="${ns_prefix}probe$$"
	ip netns add "$probe" 2>/dev/null || return 1
	ip netns del "$probe" 2>/dev/null || true
}

region_delay="${FLASHGATE_CLUSTER_REGION_DELAY:-}"
region_jitter="${FLASHGATE_CLUSTER_REGION_JITTER:-0ms}"
duration_re='^[0-9]+(\.[0-9]+)?(ms|s)$'
if [[ -n "$region_delay" ]]; then
	[[ "$region_delay" =~ $duration_re && "$region_jitter" =~ $duration_re ]] ||
		die "FLASHGATE_CLUSTER_REGION_DELAY and _JITTER must be durations such as 60ms (got '$region_delay', '$region_jitter')"
fi

mode="${FLASHGATE_CLUSTER_NETNS:-auto}"
case "$mode" in
auto) if [[ -z "$region_delay" ]] && netns_works; then mode=netns; else mode=loopback; fi ;;
1 | true) netns_works || die "FLASHGATE_CLUSTER_NETNS=1, but network namespaces need root and a working 'ip netns add'" ;& 
netns) mode=netns ;;
0 | false | loopback) mode=loopback ;;
*) die "FLASHGATE_CLUSTER_NETNS must be auto, 1 or 0 (got '$mode')" ;;
esac
if [[ -n "$region_delay" && "$mode" == netns ]]; then
	die "FLASHGATE_CLUSTER_REGION_DELAY runs on loopback ports (the crowd aims at 127.0.0.1 only): set FLASHGATE_CLUSTER_NETNS=0 or auto"
fi

declare -A host port admin_port
if [[ "$mode" == netns ]]; then
	need socat socat
	subnet="${FLASHGATE_CLUSTER_SUBNET:-10.99.0}"
	[[ "$subnet" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "FLASHGATE_CLUSTER_SUBNET must be three octets, such as 10.99.0"
	bridge_ip="$subnet.1"
	declare -A octet=([cdn]=10 [edge1]=11 [edge2]=12 [origin1]=21 [origin2]=22 [redis1]=31 [redis2]=32
		[sentinel1]=41 [sentinel2]=42 [sentinel3]=43 [gateway]=50)
	for node in "${nodes[@]}"; do host[$node]="$subnet.${octet[$node]}"; done
	port=([cdn]=80 [edge1]=8080 [edge2]=8080 [origin1]=9090 [origin2]=9090 [redis1]=6379 [redis2]=6379
		[sentinel1]=26379 [sentinel2]=26379 [sentinel3]=26379 [gateway]=9300)
	admin_port=([edge1]=8081 [edge2]=8081 [origin1]=9091 [origin2]=9091)
	cdn_peer="${host[cdn]}" # the address the edges see nginx's requests come from
	# Dev mode (dev logins) refuses non-loopback listeners unless told: these addresses exist only in our
	# namespaces and on our bridge, reachable from this machine alone.
	export FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1
else
	base="${FLASHGATE_CLUSTER_PORT_BASE:-7000}"
	[[ "$base" =~ ^[0-9]+$ && "$base" -ge 1024 && "$base" -le 65400 ]] || die "FLASHGATE_CLUSTER_PORT_BASE must be 1024-65400"
	for node in "${nodes[@]}"; do host[$node]=127.0.0.1; done
	port=([cdn]=$base [edge1]=$((base + 11)) [edge2]=$((base + 21)) [origin1]=$((base + 31)) [origin2]=$((base + 41))
		[redis1]=$((base + 51)) [redis2]=$((base + 52)) [sentinel1]=$((base + 61)) [sentinel2]=$((base + 62))
		[sentinel3]=$((base + 63)) [gateway]=$((base + 70)))
	admin_port=([edge1]=$((base + 12)) [edge2]=$((base + 22)) [origin1]=$((base + 32)) [origin2]=$((base + 42)))
	if [[ -n "$region_delay" ]]; then
		# The far region: its nginx, and the two ends of the link edge2 reaches the home region through.
		nodes+=(cdnfar linkredis linkorigin)
		host+=([cdnfar]=127.0.0.1 [linkredis]=127.0.0.1 [linkorigin]=127.0.0.1)
		port+=([cdnfar]=$((base + 1)) [linkredis]=$((base + 81)) [linkorigin]=$((base + 82)))
	fi
	# nginx sends to the edges from an address of its own (proxy_bind), so that the edges believe
	# X-Forwarded-For from nginx and from nothing else on this machine.
	cdn_peer=127.0.0.10
fi

addr() { printf '%s:%s' "${host[$1]}" "${port[$1]}"; }
admin_addr() { printf '%s:%s' "${host[$1]}" "${admin_port[$1]}"; }
url() { printf 'http://%s' "$(addr "$1")"; }
admin_url() { printf 'http://%s' "$(admin_addr "$1")"; }

# One folder per shape, so that a loopback run on other ports may run beside another: netns/ or loopback-<base>/.
if [[ "$mode" == netns ]]; then
	data="$root/.data/cluster/netns"
else
	data="$root/.data/cluster/loopback-$base"
fi

# --- stopping everything we started ------------------------------------------------------------------------

pids=()  # processes we started, in start order
names=() # their names (logs are $data/<name>.log)
tiers=() # the stop order: lower tiers stop later
services_started=""
made_netns=""

stop_tier() { # tier: TERM every live process of the tier, up to 10 s, then KILL
	local tier="$1" i j live
	for i in "${!pids[@]}"; do
		[[ "${tiers[$i]}" == "$tier" ]] || continue
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			log "stopping ${names[$i]} (pid ${pids[$i]})"
			kill -TERM "${pids[$i]}" 2>/dev/null || true
		fi
	done
	for ((j = 0; j < 100; j++)); do
		live=""
		for i in "${!pids[@]}"; do
			[[ "${tiers[$i]}" == "$tier" ]] && kill -0 "${pids[$i]}" 2>/dev/null && live=1
		done
		[[ -n "$live" ]] || break
		sleep 0.1
	done
	for i in "${!pids[@]}"; do
		[[ "${tiers[$i]}" == "$tier" ]] || continue
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			log "${names[$i]} did not stop within 10 s; sending KILL"
			kill -KILL "${pids[$i]}" 2>/dev/null || true
		fi
		wait "${pids[$i]}" 2>/dev/null || true
	done
}

cleanup() {
	local rc=$? tier
	trap - EXIT INT TERM
	trap '' INT TERM # a second Ctrl-C must not cut the cleanup short
	for tier in 5 4 3 2 1 0; do
		stop_tier "$tier"
	done
	if [[ -n "$made_netns" ]]; then
		log "removing the namespaces, veths and bridge $bridge"
		remove_netns
	fi
	if [[ -n "$services_started" ]]; then
		# shellcheck disable=SC2086 # a list of service names
		"$here/services.sh" stop $services_started || true
	fi
	rm -f "$data/pids"
	log "stopped"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# start TIER NODE NAME cmd…: runs cmd in NODE's namespace (or here), output to $data/NAME.log.
start() {
	local tier="$1" node="$2" name="$3" logfile="$data/$3.log"
	shift 3
	: >"$logfile"
	if [[ "$mode" == netns && -n "$node" ]]; then
		set -- ip netns exec "$ns_prefix$node" "$@"
	fi
	# In a session of its own, so that Ctrl-C reaches this script alone and the nodes stop in order
	# (nginx first, Redis last). setsid and ip netns exec exec the command: $! is the command's own pid.
	if [[ -n "$setsid" ]]; then
		set -- setsid "$@"
	fi
	"$@" >>"$logfile" 2>&1 </dev/null &
	# For `cluster.sh down` after a killed run: the pid and its start time, so that a reused pid is left alone.
	printf '%s %s %s\n' "$!" "$(proc_start "$!")" "$name" >>"$data/pids"
	pids+=("$!")
	names+=("$name")
	tiers+=("$tier")
}
last_pid() { printf '%s' "${pids[${#pids[@]} - 1]}"; }

wait_until() { # seconds what command…: runs command every 0.1 s until it succeeds, or dies
	local seconds="$1" what="$2" i
	shift 2
	for ((i = 0; i < seconds * 10; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	die "$what: not within $seconds s"
}

wait_ready() { # url name: wait_healthy for the node started last, with its log
	wait_healthy "$1" "$(last_pid)" "$2" "$data/$2.log"
}

setsid=""
if have setsid; then setsid=setsid; fi

port_busy() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

mkdir -p "$data"
: >"$data/pids"

# --- network namespaces ------------------------------------------------------------------------------------

if [[ "$mode" == netns ]]; then
	for node in "${nodes[@]}" br0; do
		if ip netns list 2>/dev/null | grep -qw "$ns_prefix$node" || ip link show "$ns_prefix$node" >/dev/null 2>&1; then
			die "$ns_prefix$node exists: another make run-cluster is running, or a killed one left it (deploy/local/cluster.sh down removes it)"
		fi
	done
	made_netns=1
	log "network namespaces: bridge $bridge $bridge_ip/24, one namespace per node on $subnet.0/24"
	ip link add "$bridge" type bridge
	ip addr add "$bridge_ip/24" dev "$bridge"
	ip link set "$bridge" up
	for node in "${nodes[@]}"; do
		ns="$ns_prefix$node"
		ip netns add "$ns"
		ip link add "$ns" type veth peer name "fgcp-$node"
		ip link set "fgcp-$node" netns "$ns"
		ip -n "$ns" link set "fgcp-$node" name eth0
		ip -n "$ns" addr add "${host[$node]}/24" dev eth0
		ip -n "$ns" link set lo up
		ip -n "$ns" link set eth0 up
		ip link set "$ns" master "$bridge" up
	done
else
	for node in "${nodes[@]}"; do
		for p in "${port[$node]}" ${admin_port[$node]:+"${admin_port[$node]}"}; do
			if port_busy 127.0.0.1 "$p"; then
				die "port $p is already in use (another make run-cluster?); set FLASHGATE_CLUSTER_PORT_BASE"
			fi
		done
	done
fi

# --- Redis: primary, replica, three Sentinels --------------------------------------------------------------

redis_dir="$data/redis"
rm -rf "$redis_dir"
mkdir -p "$redis_dir"
master_name="${FLASHGATE_REDIS_MASTER:-flashgate}"
# Two Redis users, as on Kubernetes (deploy/k8s/base/redis-init.sh): the default user, with a password, for
# the origins, the replica and the Sentinels; and "edge" for the edges, limited to the line's keys under the
# prefix by deploy/k8s/base/redis-edge.acl. Fresh passwords every run.
redis_prefix="${FLASHGATE_REDIS_PREFIX:-fg:}"
[[ "$redis_prefix" =~ ^[A-Za-z0-9:_.-]*$ ]] ||
	die "FLASHGATE_REDIS_PREFIX may hold letters, digits and : _ . - only (the edges' Redis user is limited to keys under it)"
export FLASHGATE_REDIS_PREFIX="$redis_prefix"
redis_password="$(openssl rand -hex 24)"
edge_redis_password="$(openssl rand -hex 24)"
edge_rules="$(grep -v -e '^#' -e '^[[:space:]]*$' "$root/deploy/k8s/base/redis-edge.acl")"
edge_rules="${edge_rules//@PREFIX@/$redis_prefix}"
edge_hash="$(printf '%s' "$edge_redis_password" | openssl dgst -sha256 -r | cut -d ' ' -f 1)"
redis_node() { # tier node extra-args…
	local node="$1"
	shift
	mkdir -p "$redis_dir/$node"
	# The passwords in a file of the node's own (CONFIG REWRITE, which Sentinel sends, rewrites it), not in ps.
	(
		umask 077
		printf 'requirepass %s\nmasterauth %s\nuser edge on #%s %s\n' \
			"$redis_password" "$redis_password" "$edge_hash" "$edge_rules" >"$redis_dir/$node/redis.conf"
	)
	start 1 "$node" "$node" redis-server "$redis_dir/$node/redis.conf" --bind "${host[$node]}" --port "${port[$node]}" \
		--protected-mode no --save "" --appendonly no --dir "$redis_dir/$node" --daemonize no "$@"
}
rcli() { REDISCLI_AUTH="$redis_password" redis-cli "$@"; }
redis_ping() { [[ "$(rcli -h "${host[$1]}" -p "${port[$1]}" ping 2>/dev/null)" == PONG ]]; }

log "starting the Redis primary on $(addr redis1) and its replica on $(addr redis2)"
redis_node redis1
wait_until 10 "the Redis primary answering PING" redis_ping redis1
redis_node redis2 --replicaof "${host[redis1]}" "${port[redis1]}"
replica_synced() { rcli -h "${host[redis2]}" -p "${port[redis2]}" info replication | grep -q 'master_link_status:up'; }
wait_until 15 "the Redis replica in sync with the primary" replica_synced

sentinel_addrs=()
for node in sentinel1 sentinel2 sentinel3; do
	mkdir -p "$redis_dir/$node"
	(umask 077 && : >"$redis_dir/$node/sentinel.conf")
	cat >"$redis_dir/$node/sentinel.conf" <<EOF
bind ${host[$node]}
port ${port[$node]}
protected-mode no
dir $redis_dir/$node
sentinel monitor $master_name ${host[redis1]} ${port[redis1]} 2
sentinel auth-pass $master_name $redis_password
sentinel down-after-milliseconds $master_name 1000
sentinel failover-timeout $master_name 3000
sentinel parallel-syncs $master_name 1
EOF
	start 2 "$node" "$node" redis-server "$redis_dir/$node/sentinel.conf" --sentinel
	sentinel_addrs+=("$(addr "$node")")
done
sentinels_agree() { # each Sentinel knows the replica and the two other Sentinels
	local node
	for node in sentinel1 sentinel2 sentinel3; do
		redis-cli -h "${host[$node]}" -p "${port[$node]}" sentinel master "$master_name" 2>/dev/null |
			awk 'prev == "num-other-sentinels" && $0 == "2" { ok = 1 } prev == "num-slaves" && $0 == "1" { r = 1 } { prev = $0 } END { exit !(ok && r) }' ||
			return 1
	done
}
log "starting three Sentinels (${sentinel_addrs[*]}), quorum 2, down-after 1000 ms"
wait_until 30 "the three Sentinels knowing each other and the replica" sentinels_agree
log "Sentinels agree: primary $(addr redis1), replica $(addr redis2)"

sentinels_csv="$(IFS=,; printf '%s' "${sentinel_addrs[*]}")"
export FLASHGATE_REDIS_SENTINELS="$sentinels_csv"
export FLASHGATE_REDIS_MASTER="$master_name"
unset FLASHGATE_REDIS_CLUSTER # Sentinels here, not a Redis Cluster (the binaries refuse both)
# With Sentinels the URL's host is ignored: only its user, password, db and options count. This one, the
# default user's, is the origins' (and FLASHGATE_RUN_THEN's); the edges get edge_redis_url.
FLASHGATE_REDIS_URL="redis://default:$redis_password@$(addr redis1)/0"
export FLASHGATE_REDIS_URL
edge_redis_url="redis://edge:$edge_redis_password@$(addr redis1)/0"

# --- Postgres (services.sh: the one on 127.0.0.1:5432, else our own) ----------------------------------------

# services.sh ensures Redis too: point it at our primary, so that it only checks it answers.
services_env="$(FLASHGATE_REDIS_URL="$FLASHGATE_REDIS_URL" "$here/services.sh" ensure)"
eval "$services_env"
services_started="$FLASHGATE_SERVICES_STARTED"
db="${FLASHGATE_CLUSTER_DB:-flashgate_cluster}"
[[ "$db" =~ ^[a-z_][a-z0-9_]*$ ]] || die "FLASHGATE_CLUSTER_DB must be a lower-case Postgres name such as flashgate_cluster (got '$db')"
"$here/services.sh" createdb "$db"
pg_hostport="${FLASHGATE_PG_BASE_URL#*@}"
if [[ "$mode" == netns ]]; then
	# Postgres listens in the root namespace's loopback; the origins reach it through a relay on the bridge.
	log "relaying $bridge_ip:5432 to Postgres on $pg_hostport for the origins' namespaces"
	start 0 "" pgrelay socat "TCP-LISTEN:5432,bind=$bridge_ip,reuseaddr,fork" "TCP:$pg_hostport"
	wait_until 10 "the Postgres relay listening" port_busy "$bridge_ip" 5432
	pg_url="postgres://postgres@$bridge_ip:5432/$db?sslmode=disable"
else
	pg_url="$FLASHGATE_PG_BASE_URL/$db?sslmode=disable"
fi

# --- secrets and dev mode (as run.sh) ----------------------------------------------------------------------

ensure_admin_tokens
# One key set, one dev user-token secret and one line audience for every edge and origin: a queue token from
# edge1 is good at edge2, and each origin takes the line requests of both edges.
FLASHGATE_TOKEN_KEYS="${FLASHGATE_TOKEN_KEYS:-k1:$(openssl rand -base64 32)}"
if [[ -n "${FLASHGATE_USER_TOKEN_SECRET:-}${FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE:-}" ]]; then
	log "dev mode: not passing FLASHGATE_USER_TOKEN_SECRET / FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE on (set FLASHGATE_DEV_USER_TOKEN_SECRET)"
	unset FLASHGATE_USER_TOKEN_SECRET FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE
fi
FLASHGATE_DEV_USER_TOKEN_SECRET="${FLASHGATE_DEV_USER_TOKEN_SECRET:-$(openssl rand -base64 32)}"
FLASHGATE_GATEWAY_API_KEY="${FLASHGATE_GATEWAY_API_KEY:-sk_sandbox_$(openssl rand -hex 16)}"
FLASHGATE_GATEWAY_WEBHOOK_SECRET="${FLASHGATE_GATEWAY_WEBHOOK_SECRET:-whsec_$(openssl rand -hex 24)}"
FLASHGATE_GATEWAY_CONTROL_TOKEN="${FLASHGATE_GATEWAY_CONTROL_TOKEN:-ctl_sandbox_$(openssl rand -hex 16)}" # not exported
export FLASHGATE_EDGE_ADMIN_TOKEN FLASHGATE_ORIGIN_ADMIN_TOKEN FLASHGATE_TOKEN_KEYS FLASHGATE_DEV_USER_TOKEN_SECRET
export FLASHGATE_GATEWAY_API_KEY FLASHGATE_GATEWAY_WEBHOOK_SECRET
export FLASHGATE_LINE_AUDIENCE="${FLASHGATE_LINE_AUDIENCE:-flashgate-cluster}"
export FLASHGATE_DEV=1
export FLASHGATE_SHUTDOWN_TIMEOUT="${FLASHGATE_SHUTDOWN_TIMEOUT:-8s}"

# --- build -------------------------------------------------------------------------------------------------

main_pkgs() { go list -e -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' "$@" 2>/dev/null | sed '/^$/d' || true; }
mapfile -t mains < <(main_pkgs ./origin ./edge ./deploy/sandboxgateway ./bench/...)
mkdir -p bin
log "building ${mains[*]##*/} into bin/"
go build -o bin/ "${mains[@]}"
for b in origin edge sandboxgateway ${region_delay:+delayproxy}; do
	[[ -x "bin/$b" ]] || die "bin/$b was not built"
done

cdn_url="$(url cdn)"

# --- sandbox payment gateway --------------------------------------------------------------------------------

log "starting the sandbox payment gateway on $(addr gateway)"
start 3 gateway gateway env FLASHGATE_GATEWAY_ADDR="$(addr gateway)" FLASHGATE_GATEWAY_PUBLIC_URL="$(url gateway)" \
	FLASHGATE_GATEWAY_WEBHOOK_URL="$cdn_url/v1/payments/webhook" \
	FLASHGATE_GATEWAY_CONTROL_TOKEN="$FLASHGATE_GATEWAY_CONTROL_TOKEN" bin/sandboxgateway
wait_ready "$(url gateway)/healthz" gateway

# --- origins -----------------------------------------------------------------------------------------------

for node in origin1 origin2; do
	log "starting $node on $(addr "$node"), admin on $(admin_addr "$node")"
	start 3 "$node" "$node" env FLASHGATE_ORIGIN_ADDR="$(addr "$node")" FLASHGATE_ORIGIN_ADMIN_ADDR="$(admin_addr "$node")" \
		FLASHGATE_INSTANCE="$node" FLASHGATE_POSTGRES_URL="$pg_url" FLASHGATE_GATEWAY_URL="$(url gateway)" \
		FLASHGATE_PAYMENT_RETURN_URL="$cdn_url/" bin/origin
	wait_ready "$(admin_url "$node")/readyz" "$node" # ready: it has reached Redis and Postgres
done

sale_id="$("$here/demosale.sh" "$(admin_url origin1)" "$(url origin1)")" || {
	tail_log "$data/origin1.log"
	die "could not create the demo sale"
}

# --- edges -------------------------------------------------------------------------------------------------

declare -A edge_origin=([edge1]="$(url origin1)" [edge2]="$(url origin2)")
declare -A edge_redis=([edge1]="" [edge2]="") # a plain Redis URL instead of the Sentinels
if [[ -n "$region_delay" ]]; then
	# The far region's edge reaches the home region through the link: Redis (whichever node the Sentinels name
	# primary, asked per connection) and origin2, each $region_delay (+ up to $region_jitter) each way.
	log "the link between the regions: $region_delay each way (+ up to $region_jitter), $(addr linkredis) → the Redis primary, $(addr linkorigin) → origin2"
	start 3 "" linkredis bin/delayproxy -listen "$(addr linkredis)" -sentinels "$sentinels_csv" -master "$master_name" \
		-delay "$region_delay" -jitter "$region_jitter"
	start 3 "" linkorigin bin/delayproxy -listen "$(addr linkorigin)" -to "$(addr origin2)" \
		-delay "$region_delay" -jitter "$region_jitter"
	wait_until 10 "the link's delay proxies listening" port_busy 127.0.0.1 "${port[linkorigin]}"
	wait_until 10 "the link's delay proxies listening" port_busy 127.0.0.1 "${port[linkredis]}"
	edge_origin[edge2]="$(url linkorigin)"
	edge_redis[edge2]="redis://edge:$edge_redis_password@$(addr linkredis)/0"
	far_pipelines="${FLASHGATE_CLUSTER_FAR_JOIN_PIPELINES:-}"
fi
for node in edge1 edge2; do
	redis_env=(FLASHGATE_REDIS_URL="$edge_redis_url") # as the Redis user "edge"
	if [[ -n "${edge_redis[$node]}" ]]; then # a plain Redis URL through the link, no Sentinels
		redis_env=(-u FLASHGATE_REDIS_SENTINELS -u FLASHGATE_REDIS_MASTER FLASHGATE_REDIS_URL="${edge_redis[$node]}")
		if [[ -n "${far_pipelines:-}" ]]; then redis_env+=(FLASHGATE_JOIN_PIPELINES="$far_pipelines"); fi
	fi
	log "starting $node on $(addr "$node"), admin on $(admin_addr "$node"), origin ${edge_origin[$node]}"
	start 4 "$node" "$node" env ${redis_env[@]+"${redis_env[@]}"} FLASHGATE_EDGE_ADDR="$(addr "$node")" FLASHGATE_EDGE_ADMIN_ADDR="$(admin_addr "$node")" \
		FLASHGATE_ORIGIN_URL="${edge_origin[$node]}" FLASHGATE_TRUSTED_PROXIES="$cdn_peer/32" \
		FLASHGATE_WEBHOOK_ALLOW="${FLASHGATE_WEBHOOK_ALLOW:-${host[gateway]}/32}" bin/edge
	wait_ready "$(admin_url "$node")/healthz" "$node"
done

# --- nginx: deploy/cdn's configuration, filled in --------------------------------------------------------

start_cdn() { # node upstream-node…: nginx on node's address, in front of the upstream edges
	local node="$1" nginx_dir="$data/nginx-$1" upstreams="" e m
	shift
	for e in "$@"; do upstreams="${upstreams}server $(addr "$e"); "; done
	rm -rf "$nginx_dir"
	mkdir -p "$nginx_dir/temp"
	# envsubst is named the placeholders to fill, in single quotes: nginx's own $variables stay.
	# shellcheck disable=SC2016
	FLASHGATE_CDN_LISTEN="$(addr "$node") default_server" \
		FLASHGATE_CDN_EDGES="$upstreams" \
		FLASHGATE_CDN_CACHE_DIR="$nginx_dir/cache" \
		FLASHGATE_CDN_ACCESS_LOG="$data/$node-access.log" \
		envsubst '${FLASHGATE_CDN_LISTEN} ${FLASHGATE_CDN_EDGES} ${FLASHGATE_CDN_CACHE_DIR} ${FLASHGATE_CDN_ACCESS_LOG}' \
		<"$root/deploy/cdn/nginx-flashgate.conf.template" >"$nginx_dir/flashgate.conf"
	: >"$data/$node-access.log"
	{
		# Workers run as root when we are root: nobody cannot enter .data/.
		if is_root; then echo "user root;"; fi
		echo "pid $nginx_dir/nginx.pid;"
		echo "error_log $data/$node-error.log notice;"
		echo "worker_processes 2;"
		echo "events { worker_connections 4096; }"
		echo "http {"
		for m in client_body proxy fastcgi uwsgi scgi; do
			if [[ "$m" == client_body || "$m" == proxy ]] || ! nginx -V 2>&1 | grep -q -- "--without-http_${m}_module"; then
				echo "    ${m}_temp_path $nginx_dir/temp/$m;"
			fi
		done
		if [[ "$mode" == loopback ]]; then
			echo "    proxy_bind $cdn_peer;"
		fi
		echo "    include $nginx_dir/flashgate.conf;"
		echo "}"
	} >"$nginx_dir/nginx.conf"
	log "starting nginx on $(addr "$node") (deploy/cdn/nginx-flashgate.conf.template, upstream ${upstreams% })"
	start 5 "$node" "$node" nginx -p "$nginx_dir" -c "$nginx_dir/nginx.conf" -g "daemon off;"
	wait_ready "$(url "$node")/healthz" "$node"
}

if [[ -n "$region_delay" ]]; then
	start_cdn cdn edge1
	start_cdn cdnfar edge2
else
	start_cdn cdn edge1 edge2
fi

# Each origin learns of the new sale from Postgres on its next catalog refresh, each edge from its origin:
# ready once both edges, and nginx, answer its snapshot.
snapshot_ok() { curl -fsS -o /dev/null --max-time 2 "$1/v1/sales/$sale_id"; }
for u in "$(url edge1)" "$(url edge2)" "$cdn_url" ${region_delay:+"$(url cdnfar)"}; do
	wait_until 30 "GET $u/v1/sales/$sale_id answering 200" snapshot_ok "$u"
done
log "the demo sale $sale_id answers through edge1, edge2 and nginx${region_delay:+ (in both regions)}"

# --- what to do with it ------------------------------------------------------------------------------------

export FLASHGATE_CLUSTER_MODE="$mode"
export FLASHGATE_CLUSTER_CDN_URL="$cdn_url"
export FLASHGATE_CLUSTER_CDN_ACCESS_LOG="$data/cdn-access.log"
export FLASHGATE_CLUSTER_REGION_DELAY="$region_delay"
FLASHGATE_CLUSTER_FAR_CDN_URL=""
if [[ -n "$region_delay" ]]; then FLASHGATE_CLUSTER_FAR_CDN_URL="$(url cdnfar)"; fi
export FLASHGATE_CLUSTER_FAR_CDN_URL
FLASHGATE_CLUSTER_EDGE_URLS="$(url edge1),$(url edge2)"
export FLASHGATE_CLUSTER_EDGE_URLS
FLASHGATE_CLUSTER_EDGE_ADMIN_URLS="$(admin_url edge1),$(admin_url edge2)"
export FLASHGATE_CLUSTER_EDGE_ADMIN_URLS
FLASHGATE_CLUSTER_ORIGIN_URLS="$(url origin1),$(url origin2)"
export FLASHGATE_CLUSTER_ORIGIN_URLS
FLASHGATE_CLUSTER_ORIGIN_ADMIN_URLS="$(admin_url origin1),$(admin_url origin2)"
export FLASHGATE_CLUSTER_ORIGIN_ADMIN_URLS
FLASHGATE_CLUSTER_REDIS_ADDRS="$(addr redis1),$(addr redis2)"
export FLASHGATE_CLUSTER_REDIS_ADDRS
redis_pids=""
for i in "${!names[@]}"; do
	case "${names[$i]}" in redis1 | redis2) redis_pids="${redis_pids:+$redis_pids,}${pids[$i]}" ;; esac
done
export FLASHGATE_CLUSTER_REDIS_PIDS="$redis_pids"
export FLASHGATE_CLUSTER_REDIS_PASSWORD="$redis_password"
export FLASHGATE_CLUSTER_EDGE_REDIS_PASSWORD="$edge_redis_password"
FLASHGATE_CLUSTER_GATEWAY_URL="$(url gateway)"
export FLASHGATE_CLUSTER_GATEWAY_URL
export FLASHGATE_CLUSTER_LOGS="$data"
links=""
if [[ "$mode" == netns ]]; then
	for node in "${nodes[@]}"; do links="${links:+$links,}$node=$ns_prefix$node"; done
fi
export FLASHGATE_CLUSTER_LINKS="$links"

echo
echo "flashgate cluster is running ($mode; Ctrl-C stops everything it started)"
echo
echo "  shop (nginx CDN)   $cdn_url/?sale=$sale_id        sale: $cdn_url/v1/sales/$sale_id"
if [[ -n "$region_delay" ]]; then
	echo "  far region (CDN)   $(url cdnfar)/?sale=$sale_id        edge2 behind it; $region_delay each way to Redis and origin2"
fi
for node in edge1 edge2; do
	echo "  $node              $(url "$node")        admin: $(admin_url "$node")  metrics: $(admin_url "$node")/metrics"
done
for node in origin1 origin2; do
	echo "  $node            $(url "$node")        admin: $(admin_url "$node")  ledger: $(admin_url "$node")/admin/sales/$sale_id/ledger"
done
echo "  redis primary      $(addr redis1)        replica: $(addr redis2)        master name: $master_name"
echo "  redis users        default (origins): $redis_password   edge (edges: ${redis_prefix}{q:* only): $edge_redis_password"
echo "  sentinels          ${sentinel_addrs[*]}"
echo "  postgres           ${pg_url%%\?*}"
echo "  payment gateway    $(url gateway)        (sandbox) intents: $(url gateway)/sandbox/intents (gateway token below)"
echo "  logs               $data/<node>.log, nginx: $data/cdn-access.log, $data/cdn-error.log"
if [[ "$mode" == netns ]]; then
	echo "  links              cut one: ip link set fgc-<node> down (up again: ... up); nodes: ${nodes[*]}"
	echo "  inside a node      ip netns exec fgc-<node> <command>"
fi
echo
echo "  edge admin token   $FLASHGATE_EDGE_ADMIN_TOKEN"
echo "  origin admin token $FLASHGATE_ORIGIN_ADMIN_TOKEN"
echo "  gateway token      $FLASHGATE_GATEWAY_CONTROL_TOKEN (control token of the sandbox's /sandbox/* routes)"
echo "  demo sale          $sale_id, open from ${FLASHGATE_DEMO_STARTS_IN:-15} s after it was created, for two hours"
echo
echo "  # which Redis is primary now (kill -9 it to watch a failover: pids $redis_pids):"
echo "  redis-cli -h ${host[sentinel1]} -p ${port[sentinel1]} sentinel get-master-addr-by-name $master_name"
echo

if [[ -n "${FLASHGATE_RUN_THEN:-}" ]]; then
	FLASHGATE_CROWD_EDGE_URL="$cdn_url"
	FLASHGATE_CROWD_FAR_EDGE_URL="$FLASHGATE_CLUSTER_FAR_CDN_URL"
	export FLASHGATE_CROWD_FAR_EDGE_URL
	FLASHGATE_CROWD_EDGE_ADMIN_URL="$(admin_url edge1)"
	FLASHGATE_CROWD_ORIGIN_ADMIN_URL="$(admin_url origin1)"
	export FLASHGATE_CROWD_EDGE_URL FLASHGATE_CROWD_EDGE_ADMIN_URL FLASHGATE_CROWD_ORIGIN_ADMIN_URL
	export FLASHGATE_DEMO_SALE_ID="$sale_id"
	# The crowd pays at the gateway and plays the naive baseline on Postgres, as under run.sh.
	FLASHGATE_GATEWAY_URL="$(url gateway)"
	export FLASHGATE_GATEWAY_URL FLASHGATE_POSTGRES_URL="$pg_url"
	log "running: $FLASHGATE_RUN_THEN"
	set +e
	FLASHGATE_USER_TOKEN_SECRET="$FLASHGATE_DEV_USER_TOKEN_SECRET" FLASHGATE_GATEWAY_CONTROL_TOKEN="$FLASHGATE_GATEWAY_CONTROL_TOKEN" \
		bash -c "$FLASHGATE_RUN_THEN"
	rc=$?
	set -e
	exit "$rc"
fi

# --- foreground until a signal ----------------------------------------------------------------------------

# A node that dies is reported and left dead (kill one to see what the others do); when none is left, stop.
declare -A reported
while :; do
	alive=()
	for i in "${!pids[@]}"; do
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			alive+=("${pids[$i]}")
		elif [[ -z "${reported[$i]:-}" ]]; then
			reported[$i]=1
			log "${names[$i]} (pid ${pids[$i]}) exited; the rest keep running (log $data/${names[$i]}.log)"
		fi
	done
	[[ ${#alive[@]} -gt 0 ]] || die "every process has exited"
	wait -n "${alive[@]}" 2>/dev/null || true
done
