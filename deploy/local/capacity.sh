#!/usr/bin/env bash
# `make bench-capacity`: capacity at the promise. The whole stack as `make run` brings it up, the naive baseline's
# server beside it (bin/naiveserver, see crowd.sh --with-naive) on the same pinned CPUs, then the crowd simulator's
# sweep (bin/crowd -sweep): at each burst arrival rate — 250, 500, 1,000, 2,000, 4,000 and 8,000 shoppers/s,
# arriving evenly over 3 s, for the standard sale's 5,000 units admitted at 2,000/s, nobody paying — a fresh sale through the edge, then
# the same crowd against the naive baseline (its sale reset). It prints the one-line verdict and writes capacity.md,
# capacity.json and capacity.png under .data/capacity/<time>/: per design, the highest rate that still holds p99
# time to an honest answer ≤ 2 s, 0 5xx and 0 oversold; the goal is flashgate ≥ 20× the baseline. While flashgate
# keeps the promise at the top rate the sweep doubles it (-sweep-max, 64,000/s) until flashgate misses, so its capacity
# is measured, not only bounded; the baseline is not played above its first miss. Then each design is played twice
# halfway between its highest rate held and its lowest missed (-sweep-refine 2), so a capacity is known to a quarter
# of it, not a half. About 7–12 minutes here, start-up included.
#
#   CAPACITY_FLAGS="-sweep 250,500,1000 -stock 300"   passes flags to bench/crowd (go run ./bench/crowd -h lists them;
#                                                    scenario flags change the sweep's scenario)
#   FLASHGATE_BENCH_PIN=0                             leaves the simulator and the stack unpinned (bench_pinning, lib.sh)
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
# bin/crowd's sweepCommand reads "-sweep <these rates>" first as make bench-capacity itself.
export FLASHGATE_RUN_THEN="deploy/local/crowd.sh --with-naive bin/crowd -sweep 250,500,1000,2000,4000,8000 ${CAPACITY_FLAGS:-}"
exec "$here/run.sh"
