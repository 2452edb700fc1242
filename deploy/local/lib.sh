# shellcheck shell=bash
# shellcheck disable=SC2154 # `here` is set by the sourcing script
# Sourced by test.sh, bench.sh, run.sh and cluster.sh: what they need before running Go against real services.
#   log MESSAGE                 a progress line on stderr
#   die MESSAGE                 an error line on stderr, then exit 1
#   tail_log FILE               the last 40 lines of a process's log, on stderr
#   apt_install [--with-recommends] PACKAGE...
#                               installs with apt-get (as root): quiet on success; on failure the log's tail, its
#                               path (.data/apt-get.log) and status 1
#   wait_healthy URL PID NAME LOG
#                               waits (30 s) until URL answers 200, or dies showing LOG if PID exits first
#   need_go                     puts /usr/local/go/bin on PATH if go is not there, or exits 1
#   use_services DATABASE       ensures Redis and Postgres (services.sh), creates DATABASE, exports
#                               FLASHGATE_REDIS_URL and FLASHGATE_PG_BASE_URL, and stops on exit only the
#                               services it started
#   bench_pinning               sets FLASHGATE_STACK_CPUS and FLASHGATE_RUN_THEN_CPUS (unless given) so that a
#                               load generator has a core of its own: the last CPU for it, the others for the stack
#   pin_listener CPUS PORT      pins the process listening on 127.0.0.1:PORT and its children (all threads) to
#                               CPUS, recording their affinity first; unpin_listeners puts it back
#   nice_listener N PORT        the same for the scheduling priority: nice N (all threads, children included);
#                               unpin_listeners puts it back too
# The caller sets `here` (this folder) first.

log() { printf 'flashgate: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

apt_install() {
	local flags=(-y --no-install-recommends) logfile
	logfile="$(cd "$here/../.." && pwd)/.data/apt-get.log"
	if [[ "${1:-}" == --with-recommends ]]; then
		flags=(-y)
		shift
	fi
	mkdir -p "$(dirname "$logfile")"
	log "installing $* with apt-get"
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install "${flags[@]}" "$@"; } >"$logfile" 2>&1; then
		tail -n 20 "$logfile" >&2 || true
		log "error: apt-get install $* failed (log: $logfile)"
		return 1
	fi
	hash -r
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

workspace_pkgs() { # → ./dir/... for each module go.work uses, from the root (a plain ./... stops at a nested module)
	go list -m -f '{{.Dir}}/...' | sed "s|^$PWD|.|"
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

# use_test_services is use_services for the tests, exporting FLASHGATE_TEST_REDIS_URL and
# FLASHGATE_TEST_POSTGRES_URL. The tests get a Redis and a Postgres of their own, started here (stopped at the
# end; Postgres's data folder stays for the next run), on ports of the checkout's own below the tests' free
# ports: the product's and the lab's tests at once open more than the 100 connections a stock Postgres
# allows, and nothing in either outlives the run, so Postgres need not flush to disk. As root they run at
# nice -5: on two cores shared with Chromium, three whole stacks and their crowds, a Redis at the same
# priority went unanswered past the edges' timeouts, where in a deployment it has CPUs of its own.
# FLASHGATE_REDIS_URL / FLASHGATE_REDIS_PORT and FLASHGATE_PG_BASE_URL / FLASHGATE_PG_PORT choose servers
# instead. Where a server of our own cannot be started (not root, and its binaries not installed: a Redis or
# Postgres in a container), the tests use the one services.sh finds on its usual port, as make run does.
use_test_services() {
	local checkout sum
	checkout="$(cd "$here/../.." && pwd)"
	sum="$(printf '%s' "$checkout" | cksum | cut -d' ' -f1)"
	export FLASHGATE_SERVICES_NICE="${FLASHGATE_SERVICES_NICE:--5}"
	local can_install="" # root: services.sh installs what is missing with apt-get
	[[ "$(id -u)" -ne 0 ]] || can_install=1
	if [[ -z "${FLASHGATE_REDIS_URL:-}${FLASHGATE_REDIS_PORT:-}" ]]; then
		if [[ -n "$can_install" ]] || command -v redis-server >/dev/null 2>&1; then
			export FLASHGATE_REDIS_PORT="$((17379 + sum % 1000))"
		else
			log "redis-server is not installed: the tests use the Redis services.sh finds"
		fi
	fi
	if [[ -z "${FLASHGATE_PG_BASE_URL:-}${FLASHGATE_PG_PORT:-}" ]]; then
		# initdb where services.sh looks for it: PATH, then Debian's server folders.
		if [[ -n "$can_install" ]] || command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
			export FLASHGATE_PG_PORT="$((15432 + sum % 1000))"
			export FLASHGATE_PG_DATA="$checkout/.data/test-postgres"
			export FLASHGATE_PG_SERVER_OPTIONS="-c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
		else
			log "initdb is not installed: the tests use the Postgres services.sh finds (make test may need more than its 100 connections)"
		fi
	fi
	use_services flashgate_test
	export FLASHGATE_TEST_REDIS_URL="$FLASHGATE_REDIS_URL"
	export FLASHGATE_TEST_POSTGRES_URL="$FLASHGATE_PG_BASE_URL/flashgate_test?sslmode=disable"
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

# bench_pinning: a benchmark's load generator (FLASHGATE_RUN_THEN's command) gets the machine's last CPU, the
# stack (our processes, Redis, Postgres) the others, so a starved generator is never taken for a slow system.
# FLASHGATE_BENCH_PIN=0 leaves everything unpinned; a machine of one CPU, or without taskset, cannot pin.
bench_pinning() {
	local n
	n="$(nproc 2>/dev/null || echo 1)"
	if [[ "${FLASHGATE_BENCH_PIN:-1}" == 0 ]]; then
		log "pinning: off (FLASHGATE_BENCH_PIN=0): the load generator shares every CPU with the stack"
		return 0
	fi
	if ((n < 2)) || ! command -v taskset >/dev/null 2>&1; then
		log "pinning: not possible here ($n CPU(s), taskset $(command -v taskset >/dev/null 2>&1 && echo found || echo missing)): the load generator shares the CPU with the stack"
		return 0
	fi
	if ((n == 2)); then
		export FLASHGATE_STACK_CPUS="${FLASHGATE_STACK_CPUS:-0}"
	else
		export FLASHGATE_STACK_CPUS="${FLASHGATE_STACK_CPUS:-0-$((n - 2))}"
	fi
	export FLASHGATE_RUN_THEN_CPUS="${FLASHGATE_RUN_THEN_CPUS:-$((n - 1))}"
	# On the stack's shared CPUs the waiting room (edge, Redis) goes first and the checkout (origin, the sandbox
	# gateway, Postgres, the naive baseline's server) takes what is left, as separate machines would keep the
	# tiers apart in a deployment: a burst of checkouts must not delay the crowd's "you are in line".
	export FLASHGATE_CHECKOUT_NICE="${FLASHGATE_CHECKOUT_NICE:-$checkout_nice_default}"
	log "pinning: the stack on CPU(s) $FLASHGATE_STACK_CPUS (the checkout at nice $FLASHGATE_CHECKOUT_NICE), the load generator on CPU(s) $FLASHGATE_RUN_THEN_CPUS"
}

# checkout_nice_default is bench_pinning's FLASHGATE_CHECKOUT_NICE.
checkout_nice_default=10

# nice_prefix N: the words that start a command at nice N (none for 0).
nice_prefix() {
	if [[ -n "${1:-}" && "$1" != 0 ]]; then
		printf '%s\n' nice -n "$1"
	fi
}

pinned_pids=()       # processes pin_listener pinned
pinned_affinities=() # their CPU lists before
niced_pids=()        # processes nice_listener reniced
niced_before=()      # their nice values before
# shellcheck disable=SC2317 # called from the callers' EXIT traps
unpin_listeners() {
	local i pid child
	for i in "${!pinned_pids[@]}"; do
		pid="${pinned_pids[$i]}"
		kill -0 "$pid" 2>/dev/null || continue
		# Children forked while pinned (Postgres backends) inherited the pinning: they go back too.
		for child in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
			taskset -a -p -c "${pinned_affinities[$i]}" "$child" >/dev/null 2>&1 || true
		done
	done
	for i in "${!niced_pids[@]}"; do
		pid="${niced_pids[$i]}"
		kill -0 "$pid" 2>/dev/null || continue
		renice_tree "${niced_before[$i]}" "$pid"
	done
	pinned_pids=()
	pinned_affinities=()
	niced_pids=()
	niced_before=()
}

# renice_tree N PID: every thread of PID and of its children to nice N (nice is per thread on Linux).
renice_tree() {
	local n="$1" pid="$2" proc task
	for proc in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
		for task in /proc/"$proc"/task/*; do
			renice -n "$n" -p "${task##*/}" >/dev/null 2>&1 || true
		done
	done
}

# listener_pid PORT: the process listening on 127.0.0.1:PORT, if ss can say.
listener_pid() {
	ss -Htlnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1
}

nice_listener() { # n port
	local n="$1" port="$2" pid before
	pid="$(listener_pid "$port")"
	if [[ -z "$pid" ]]; then
		log "priority: nothing listens on port $port (or ss cannot say): left as it is"
		return 0
	fi
	before="$(ps -o ni= -p "$pid" 2>/dev/null | tr -d ' ')"
	[[ -n "$before" ]] || return 0
	niced_pids+=("$pid")
	niced_before+=("$before")
	renice_tree "$n" "$pid"
	log "priority: $(cat "/proc/$pid/comm" 2>/dev/null || echo "pid $pid") on port $port at nice $n (was $before)"
}

pin_listener() { # cpus port
	local cpus="$1" port="$2" pid child before
	pid="$(listener_pid "$port")"
	if [[ -z "$pid" ]]; then
		log "pinning: nothing of ours listens on port $port (or ss cannot say): left unpinned"
		return 0
	fi
	before="$(taskset -p -c "$pid" 2>/dev/null | sed -n 's/.*: *//p')"
	[[ -n "$before" ]] || return 0
	pinned_pids+=("$pid")
	pinned_affinities+=("$before")
	for child in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
		taskset -a -p -c "$cpus" "$child" >/dev/null 2>&1 || log "pinning: could not pin pid $child (port $port)"
	done
	log "pinning: $(cat "/proc/$pid/comm" 2>/dev/null || echo "pid $pid") on port $port to CPU(s) $cpus (was $before)"
}
