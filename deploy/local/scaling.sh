#!/usr/bin/env bash
# `make bench-scaling`: the scaling law, measured. The whole stack as `make run` brings it up, the naive baseline's
# server beside it (bin/naiveserver, see crowd.sh --with-naive) on the same pinned CPUs, then the crowd simulator's
# scaling run (bin/crowd -scaling): the standard sale — 5,000 units admitted at 2,000/s, the pre-queue, burst and
# tail of make bench, the crowd stopped 75 s after the open — with 20,000 and then 100,000 shoppers, each a fresh
# sale through the edge, then the same crowd against the naive baseline (its sale reset). It prints the one-line
# verdict and writes scaling.md and scaling.json under .data/scaling/<time>/: per design each process's CPU seconds
# at each size and per 1,000 shoppers, the origin's work by route and Postgres's own counters per size; the goal is
# origin + Postgres CPU at 100,000 shoppers ≤ 1.3× that at 20,000. About 5–6 minutes here, start-up included.
#
#   SCALING_FLAGS="-max-duration 45 -naive=false"   passes flags to bench/crowd (go run ./bench/crowd -h lists them;
#                                                  scenario flags change every size's sale alike)
#   FLASHGATE_BENCH_PIN=0                           leaves the simulator and the stack unpinned (bench_pinning, lib.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_pinning

# As in crowd.sh: the simulated CDN names each shopper's address, and one admin token drives both tiers.
export FLASHGATE_TRUSTED_PROXIES="${FLASHGATE_TRUSTED_PROXIES:-127.0.0.1/32}"
if [[ -z "${FLASHGATE_ADMIN_TOKEN:-}" ]]; then
	FLASHGATE_ADMIN_TOKEN="$(openssl rand -base64 32)"
	export FLASHGATE_ADMIN_TOKEN
fi
# bin/crowd's scalingCommand reads "-scaling <these sizes>" first as make bench-scaling itself.
export FLASHGATE_RUN_THEN="deploy/local/crowd.sh --with-naive bin/crowd -scaling 20000,100000 ${SCALING_FLAGS:-}"
exec "$here/run.sh"
