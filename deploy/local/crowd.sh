#!/usr/bin/env bash
# `make bench`: the whole stack as `make run` brings it up, then the crowd simulator (bench/crowd) plays the
# standard sale through the edge — 100,000 shoppers, 5,000 units, admission 2,000/s — and the same crowd against
# the naive baseline; it prints the summary and writes the report (JSON, Markdown, PNG charts) under
# .data/crowd/<time>/; then everything it started stops.
#
#   CROWD_FLAGS="-shoppers 20000 -ceiling"   passes flags to bench/crowd (go run ./bench/crowd -h lists them)
#   FLASHGATE_BENCH_PIN=0                     leaves the simulator and the stack unpinned (see bench_pinning in
#                                             lib.sh: by default the simulator gets the last CPU, the stack the rest)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
bench_pinning

# The simulated shoppers reach the edge through a simulated CDN on 127.0.0.1, which names each shopper's
# address in X-Forwarded-For: believe it from there, as a deployment believes its CDN.
export FLASHGATE_TRUSTED_PROXIES="${FLASHGATE_TRUSTED_PROXIES:-127.0.0.1/32}"
# The crowd drives both admin listeners (the sale, the admission rate) with one token: run.sh gives it to both
# tiers (this stack lives for one run).
if [[ -z "${FLASHGATE_ADMIN_TOKEN:-}" ]]; then
	FLASHGATE_ADMIN_TOKEN="$(openssl rand -base64 32)"
	export FLASHGATE_ADMIN_TOKEN
fi
export FLASHGATE_RUN_THEN="bin/crowd ${CROWD_FLAGS:-}"
exec "$here/run.sh"
