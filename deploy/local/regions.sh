#!/usr/bin/env bash
# `make bench-regions`: one sale across two regions (docs/REGIONS.md), measured. make run-cluster's shape on
# loopback ports with edge2 and a second nginx in a far region, REGION_DELAY (60 ms) each way from the home
# region's Redis and origin2 (deploy/local/cluster.sh, FLASHGATE_CLUSTER_REGION_DELAY); then the crowd simulator
# (bench/crowd) sends half its shoppers through each region's nginx and reports, per region, the time to an
# honest answer, the join and reserve round trips and the time to admission; then everything stops.
#
#   REGION_DELAY=80ms REGION_JITTER=10ms   the link's one-way delay, and the spread added to it
#   FAR_JOIN_PIPELINES=8                   the far edge's join pipelines (FLASHGATE_JOIN_PIPELINES; home keeps 2)
#   CROWD_FLAGS="-shoppers 50000"          more flags for bench/crowd (go run ./bench/crowd -h lists them)
#
# The crowd comes from one address (127.0.0.1) and nginx hands the edges the address it saw, so the per-IP limits
# would meter the whole crowd as one client: they are raised for this run (per-account limits stay).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

export FLASHGATE_CLUSTER_REGION_DELAY="${REGION_DELAY:-60ms}"
export FLASHGATE_CLUSTER_REGION_JITTER="${REGION_JITTER:-0ms}"
export FLASHGATE_CLUSTER_FAR_JOIN_PIPELINES="${FAR_JOIN_PIPELINES:-8}"
export FLASHGATE_CLUSTER_NETNS=0
export FLASHGATE_CLUSTER_PORT_BASE="${FLASHGATE_CLUSTER_PORT_BASE:-7600}" # clear of a make run-cluster on 7000
for limit in JOIN_IP POLL_IP RESERVE_IP JOIN_SUBNET POLL_SUBNET; do
	var="FLASHGATE_LIMIT_$limit"
	export "$var=${!var:-1000000-S}"
done
# The crowd drives both tiers' admin listeners with one token: cluster.sh gives it to both.
if [[ -z "${FLASHGATE_ADMIN_TOKEN:-}" ]]; then
	FLASHGATE_ADMIN_TOKEN="$(openssl rand -base64 32)"
	export FLASHGATE_ADMIN_TOKEN
fi
export FLASHGATE_RUN_THEN="bin/crowd -naive=false -shoppers 20000 -stock 1000 -rate 1000 -bots 0 ${CROWD_FLAGS:-}"
exec "$here/cluster.sh"
