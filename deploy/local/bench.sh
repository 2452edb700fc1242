#!/usr/bin/env bash
# `make bench-reserve` and `make bench-edge`: runs a benchmark program (first argument, e.g. ./bench/edgebench)
# against real Redis and Postgres.
#
# Uses (or starts) Redis and Postgres through services.sh, creates the database flashgate_bench and exports
#   FLASHGATE_BENCH_REDIS_URL     redis://127.0.0.1:PORT/0
#   FLASHGATE_BENCH_POSTGRES_URL  postgres://postgres@127.0.0.1:PORT/flashgate_bench?sslmode=disable
# Arguments are passed to the benchmark program, after -report-json .data/<program>/<UTC time>/report.json
# (bench/model reads the newest there; a -report-json among the arguments wins). Stops whatever services it
# started.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# shellcheck source=lib.sh
. "$here/lib.sh"
need_go
use_services flashgate_bench

export FLASHGATE_BENCH_REDIS_URL="$FLASHGATE_REDIS_URL"
export FLASHGATE_BENCH_POSTGRES_URL="$FLASHGATE_PG_BASE_URL/flashgate_bench?sslmode=disable"
log "FLASHGATE_BENCH_REDIS_URL=$FLASHGATE_BENCH_REDIS_URL"
log "FLASHGATE_BENCH_POSTGRES_URL=$FLASHGATE_BENCH_POSTGRES_URL"

prog="${1:?usage: deploy/local/bench.sh ./bench/<program> [flags]}"
shift
report=".data/$(basename "$prog")/$(date -u +%Y%m%d-%H%M%S)/report.json"
log "go run $prog -report-json $report $*"
status=0
go run "$prog" -report-json "$report" "$@" || status=$?
if [[ -f "$report" ]]; then
	log "report: $report"
else
	log "no report in $report (nothing measured, or the arguments named another -report-json)"
fi
exit "$status"
