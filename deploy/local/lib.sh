# shellcheck shell=bash
# shellcheck disable=SC2154 # `here` is set by the sourcing script
# Sourced by test.sh, bench.sh, run.sh and cluster.sh: what they need before running Go against real services.
#   log MESSAGE                 a progress line on stderr
#   die MESSAGE                 an error line on stderr, then exit 1
#   tail_log FILE               the last 40 lines of a process's log, on stderr
#   wait_healthy URL PID NAME LOG
#                               waits (30 s) until URL answers 200, or dies showing LOG if PID exits first
#   need_go                     puts /usr/local/go/bin on PATH if go is not there, or exits 1
#   use_services DATABASE       ensures Redis and Postgres (services.sh), creates DATABASE, exports
#                               FLASHGATE_REDIS_URL and FLASHGATE_PG_BASE_URL, and stops on exit only the
#                               services it started
# The caller sets `here` (this folder) first.

log() { printf 'flashgate: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

tail_log() { # file
	log "last lines of $1:"
	tail -n 40 "$1" >&2 2>/dev/null || true
}

wait_healthy() { # url pid name logfile
	local url="$1" pid="$2" name="$3" logfile="$4" i
	for ((i = 0; i < 300; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail_log "$logfile"
			die "$name exited during start-up"
		fi
		if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then
			log "$name is ready ($url)"
			return 0
		fi
		sleep 0.1
	done
	tail_log "$logfile"
	die "$name did not answer 200 on $url within 30 s"
}

need_go() {
	command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
	command -v go >/dev/null 2>&1 || {
		log "error: go is not installed (looked in PATH and /usr/local/go/bin)"
		exit 1
	}
}

services_started=""
# shellcheck disable=SC2317 # reached through the EXIT trap
stop_started_services() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "$services_started" ]]; then
		# shellcheck disable=SC2086 # a list of service names
		"$here/services.sh" stop $services_started || true
	fi
	exit "$rc"
}

use_services() {
	trap stop_started_services EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	local services_env
	services_env="$("$here/services.sh" ensure)"
	eval "$services_env"
	services_started="$FLASHGATE_SERVICES_STARTED"
	"$here/services.sh" createdb "$1"
}

# ensure_admin_tokens sets FLASHGATE_EDGE_ADMIN_TOKEN and FLASHGATE_ORIGIN_ADMIN_TOKEN where they are unset:
# to FLASHGATE_ADMIN_TOKEN when it is given for both, else to 32 random bytes each, as the binaries require.
ensure_admin_tokens() {
	local tier var
	for tier in EDGE ORIGIN; do
		var="FLASHGATE_${tier}_ADMIN_TOKEN"
		[[ -z "${!var:-}" ]] || continue
		if [[ -n "${FLASHGATE_ADMIN_TOKEN:-}" ]]; then
			printf -v "$var" '%s' "$FLASHGATE_ADMIN_TOKEN"
		else
			printf -v "$var" '%s' "$(openssl rand -base64 32)"
			log "generated $var"
		fi
	done
}
