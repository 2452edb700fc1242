#!/usr/bin/env bash
# `make bench`: the whole stack as `make run` brings it up, then the crowd simulator (bench/crowd) plays the
# standard sale through the edge — 100,000 shoppers, 5,000 units, admission 2,000/s, beside them two bot cohorts
# (1,000 smart accounts and 200 hammering ones) — twice, each a sale of its own: with the defences against bots off
# (no proof of work, the edge's tarpit off, one_unit_per_payer false), then on; then the same crowd against the
# naive baseline; it prints the summary and writes the report (JSON, Markdown, PNG charts) under
# .data/crowd/<time>/; then everything it started stops.
#
#   CROWD_FLAGS="-shoppers 20000 -ceiling"   passes flags to bench/crowd after make bench's own (-smart-bots 1000
#                                            -defences off,on -device-bits 14; a flag given again wins), go run ./bench/crowd -h
#                                            lists them; CROWD_FLAGS="-defences on" runs the defended run alone
#   FLASHGATE_BENCH_PIN=0                     leaves the simulator and the stack unpinned (see bench_pinning in
#                                             lib.sh: by default the simulator gets the last CPU, the stack the rest)
#   FLASHGATE_CHECKOUT_NICE=10                the checkout's nice value on the stack's CPUs (0: the same as the
#                                             waiting room's; bench_pinning sets 10 when it pins)
#   FLASHGATE_NAIVE_ADDR=127.0.0.1:9400       where the naive baseline's server listens
#
# The naive baseline runs as a process of its own, bin/naiveserver, on the stack's CPUs (the simulator resets its
# sale before each run): `crowd.sh --with-naive COMMAND…` is what run.sh runs once the stack is up — it starts
# bin/naiveserver (under taskset -c $FLASHGATE_STACK_CPUS when set), runs COMMAND with FLASHGATE_CROWD_NAIVE_URL
# pointing at it, then stops it, and exits with COMMAND's status. make bench-capacity (capacity.sh) uses it too.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

naive_pid=""
# shellcheck disable=SC2317 # reached through the EXIT trap
stop_naive() {
	local rc=$? i
	trap - EXIT INT TERM
	if [[ -n "$naive_pid" ]] && kill -0 "$naive_pid" 2>/dev/null; then
		log "stopping the naive server (pid $naive_pid)"
		kill -TERM "$naive_pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$naive_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$naive_pid" 2>/dev/null || true
		wait "$naive_pid" 2>/dev/null || true
	fi
	exit "$rc"
}

with_naive() { # command…
	local addr="${FLASHGATE_NAIVE_ADDR:-127.0.0.1:9400}" naive_log=.data/naiveserver.log rc pinned=() niced=()
	[[ -x bin/naiveserver ]] || die "bin/naiveserver is missing (run.sh builds it with the other bench commands)"
	if (exec 3<>"/dev/tcp/127.0.0.1/${addr##*:}") 2>/dev/null; then
		die "port ${addr##*:} is already in use (another make bench?); set FLASHGATE_NAIVE_ADDR to another port"
	fi
	if [[ -n "${FLASHGATE_STACK_CPUS:-}" ]]; then
		pinned=(taskset -c "$FLASHGATE_STACK_CPUS")
	fi
	mkdir -p .data
	: >"$naive_log"
	trap stop_naive EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	log "starting the naive server on $addr${FLASHGATE_STACK_CPUS:+, CPU(s) $FLASHGATE_STACK_CPUS} (log $naive_log)"
	# The naive design's one server is its checkout: it runs at the checkout's priority, beside Postgres.
	mapfile -t niced < <(nice_prefix "${FLASHGATE_CHECKOUT_NICE:-0}")
	FLASHGATE_NAIVE_ADDR="$addr" ${pinned[@]+"${pinned[@]}"} ${niced[@]+"${niced[@]}"} bin/naiveserver >>"$naive_log" 2>&1 &
	naive_pid=$!
	wait_healthy "http://$addr/healthz" "$naive_pid" "naive server" "$naive_log"
	set +e
	FLASHGATE_CROWD_NAIVE_URL="http://$addr" "$@"
	rc=$?
	set -e
	return "$rc"
}

if [[ "${1:-}" == --with-naive ]]; then
	shift
	with_naive "$@"
	exit $?
fi

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
# bin/crowd's command() reads these first flags as make bench itself (its benchFlags); keep the two the same.
export FLASHGATE_RUN_THEN="deploy/local/crowd.sh --with-naive bin/crowd -smart-bots 1000 -defences off,on -device-bits 14 ${CROWD_FLAGS:-}"
exec "$here/run.sh"
