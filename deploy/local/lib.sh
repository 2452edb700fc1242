# shellcheck shell=bash
# shellcheck disable=SC2154 # `here` is set by the sourcing script
# Sourced by test.sh and bench.sh: what both need before running Go against real services.
#   log MESSAGE                 a progress line on stderr
#   need_go                     puts /usr/local/go/bin on PATH if go is not there, or exits 1
#   use_services DATABASE       ensures Redis and Postgres (services.sh), creates DATABASE, exports
#                               FLASHGATE_REDIS_URL and FLASHGATE_PG_BASE_URL, and stops on exit only the
#                               services it started
# The caller sets `here` (this folder) first.

log() { printf 'flashgate: %s\n' "$*" >&2; }

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
