#!/usr/bin/env bash
# `make bench-reserve` and `make bench-edge`: runs a benchmark program (first argument, e.g. ./bench/edgebench)
# against real Redis and Postgres.
#
# Uses (or starts) Redis and Postgres through services.sh, creates the database flashgate_bench and exports
#   FLASHGATE_BENCH_REDIS_URL     redis://127.0.0.1:PORT/0
#   FLASHGATE_BENCH_POSTGRES_URL  postgres://postgres@127.0.0.1:PORT/flashgate_bench?sslmode=disable
# Arguments are passed to the benchmark program. Stops whatever services it started.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

log() { printf 'flashgate: %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || {
	log "error: go is not installed (looked in PATH and /usr/local/go/bin)"
	exit 1
}
if [[ ! -d bench/reservebench ]]; then
	log "error: bench/reservebench does not exist yet"
	exit 1
fi

services_started=""
# shellcheck disable=SC2317 # reached through the EXIT trap
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "$services_started" ]]; then
		# shellcheck disable=SC2086 # a list of service names
		"$here/services.sh" stop $services_started || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

services_env="$("$here/services.sh" ensure)"
eval "$services_env"
services_started="$FLASHGATE_SERVICES_STARTED"
"$here/services.sh" createdb flashgate_bench

export FLASHGATE_BENCH_REDIS_URL="$FLASHGATE_REDIS_URL"
export FLASHGATE_BENCH_POSTGRES_URL="$FLASHGATE_PG_BASE_URL/flashgate_bench?sslmode=disable"
log "FLASHGATE_BENCH_REDIS_URL=$FLASHGATE_BENCH_REDIS_URL"
log "FLASHGATE_BENCH_POSTGRES_URL=$FLASHGATE_BENCH_POSTGRES_URL"

prog="${1:?usage: deploy/local/bench.sh ./bench/<program> [flags]}"
shift
log "go run $prog $*"
status=0
go run "$prog" "$@" || status=$?
exit "$status"
