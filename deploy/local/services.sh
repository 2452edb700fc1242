#!/usr/bin/env bash
# Makes a Redis and a Postgres available for the local stack and the tests.
#
#   deploy/local/services.sh ensure           use what already listens, else start our own under .data/
#                                             (installing redis-server / postgresql with apt-get when root);
#                                             prints `export NAME='value'` lines on stdout for eval:
#                                               FLASHGATE_REDIS_URL      redis://127.0.0.1:PORT/0
#                                               FLASHGATE_PG_BASE_URL    postgres://postgres@127.0.0.1:PORT (no database)
#                                               FLASHGATE_SERVICES_STARTED  what this call started ("redis postgres", or "")
#   deploy/local/services.sh createdb NAME    creates database NAME if it is missing
#   deploy/local/services.sh stop [SERVICE…]  stops what `ensure` started (all of .data/started, or only the
#                                             named services among them); never touches anything else
#
# Sourcing this file defines `flashgate_services ensure|createdb|stop`, which exports the variables into the
# calling shell instead of printing them (and, like any sourced script, sets -euo pipefail there).
#
# Ports: FLASHGATE_REDIS_PORT (6379) and FLASHGATE_PG_PORT (5432). If FLASHGATE_REDIS_URL or
# FLASHGATE_PG_BASE_URL are already set, they are checked and used as they are. A Postgres started here keeps
# its data in FLASHGATE_PG_DATA (.data/postgres) and runs with FLASHGATE_PG_SERVER_OPTIONS added to its
# command line (e.g. "-c max_connections=400"). Servers started here are reniced to FLASHGATE_SERVICES_NICE
# (e.g. -5, as root) when it is set.
# Progress goes to stderr, prefixed "flashgate:".
set -euo pipefail

_fg_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_fg_data="$_fg_root/.data"
_fg_started_file="$_fg_data/started"
_fg_started_now=""

_fg_log() { printf 'flashgate: %s\n' "$*" >&2; }
_fg_die() {
	_fg_log "error: $*"
	exit 1
}
_fg_is_root() { [[ "$(id -u)" -eq 0 ]]; }
# _fg_renice NAME PID sets a server we started, and the processes it has forked so far (those it forks later
# inherit it), to FLASHGATE_SERVICES_NICE, when that is set and allowed (a negative value needs root).
_fg_renice() {
	local n="${FLASHGATE_SERVICES_NICE:-}" pids
	[[ -n "$n" && "$n" != 0 && -n "$2" ]] || return 0
	if [[ "$n" -lt 0 ]] && ! _fg_is_root; then
		return 0
	fi
	pids="$2 $(pgrep -P "$2" | tr '\n' ' ' || true)"
	# shellcheck disable=SC2086 # a list of pids
	if renice -n "$n" -p $pids >/dev/null 2>&1; then
		_fg_log "$1: running at nice $n"
	else
		_fg_log "$1: could not renice to $n; left as it is"
	fi
}
_fg_have() { command -v "$1" >/dev/null 2>&1; }

_fg_lock() {
	mkdir -p "$_fg_data"
	if _fg_have flock; then
		# Daemons started under the lock get fd 9 closed (9>&-), or they would hold it for ever.
		exec 9>"$_fg_data/.lock"
		if ! flock -n 9; then
			_fg_log "waiting for another services.sh in this checkout (lock $_fg_data/.lock)"
			flock -w 600 9 || _fg_die "still locked after 10 minutes: $_fg_data/.lock"
		fi
	fi
}
_fg_unlock() {
	if _fg_have flock; then
		exec 9>&-
	fi
}

_fg_apt_install() {
	_fg_log "installing $* with apt-get (running as root)"
	# Quiet on success; show the tail when it fails.
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; } \
		>"$_fg_data/apt-get.log" 2>&1 9>&-; then
		tail -n 20 "$_fg_data/apt-get.log" >&2 || true
		_fg_die "apt-get install $* failed (log: $_fg_data/apt-get.log)"
	fi
}

# --- .data/started bookkeeping: lines "redis PORT PIDFILE" and "postgres PORT DATADIR USER" --------------

_fg_record() {
	printf '%s\n' "$*" >>"$_fg_started_file"
	_fg_started_now="${_fg_started_now:+$_fg_started_now }$1"
}

_fg_unrecord() { # service port
	[[ -f "$_fg_started_file" ]] || return 0
	local tmp="$_fg_started_file.tmp.$$"
	awk -v s="$1" -v p="$2" '!($1 == s && $2 == p)' "$_fg_started_file" >"$tmp" || true
	mv -f "$tmp" "$_fg_started_file"
}

# --- Redis ----------------------------------------------------------------------------------------------

_fg_redis_ping() { # port → 0 when PONG
	local port="$1" out
	if _fg_have redis-cli; then
		out="$(timeout 5 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" || return 1
	else
		# No redis-cli: speak RESP over bash's /dev/tcp.
		# shellcheck disable=SC2016 # $1 and $l expand in the inner bash
		out="$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "PING\r\n" >&3 && IFS= read -r l <&3 && printf "%s" "$l"' _ "$port" 2>/dev/null)" || return 1
		out="${out#+}"
		out="${out%$'\r'}"
	fi
	[[ "$out" == "PONG" ]]
}

_fg_redis_start() { # port
	local port="$1" pidfile="$_fg_data/redis-$1.pid" logfile="$_fg_data/redis-$1.log" i
	mkdir -p "$_fg_data/redis"
	rm -f "$pidfile"
	_fg_log "redis: starting redis-server on 127.0.0.1:$port (data $_fg_data/redis, log $logfile)"
	redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
		--dir "$_fg_data/redis" --pidfile "$pidfile" --logfile "$logfile" >/dev/null 9>&- ||
		_fg_die "redis-server did not start (log: $logfile)"
	_fg_record redis "$port" "$pidfile"
	for ((i = 0; i < 100; i++)); do
		if _fg_redis_ping "$port"; then
			_fg_log "redis: ready on 127.0.0.1:$port"
			_fg_renice redis "$(cat "$pidfile" 2>/dev/null)"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$logfile" >&2 2>/dev/null || true
	_fg_die "redis-server on port $port did not answer PING within 10 s (log: $logfile)"
}

_fg_redis_ensure() {
	if [[ -n "${FLASHGATE_REDIS_URL:-}" ]]; then
		if _fg_have redis-cli && ! timeout 5 redis-cli -u "$FLASHGATE_REDIS_URL" ping 2>/dev/null | grep -q PONG; then
			_fg_die "FLASHGATE_REDIS_URL is set ($FLASHGATE_REDIS_URL) but does not answer PING"
		fi
		_fg_log "redis: using FLASHGATE_REDIS_URL from the environment"
		export FLASHGATE_REDIS_URL
		return 0
	fi
	local port="${FLASHGATE_REDIS_PORT:-6379}"
	if _fg_redis_ping "$port"; then
		_fg_log "redis: using the one already running on 127.0.0.1:$port"
	else
		if ! _fg_have redis-server || ! _fg_have redis-cli; then
			if _fg_is_root && _fg_have apt-get; then
				_fg_apt_install redis-server
				hash -r
			else
				_fg_log "redis: nothing answers on 127.0.0.1:$port and redis-server is not installed."
				_fg_log "  install it, e.g.: sudo apt-get install redis-server   (macOS: brew install redis)"
				_fg_log "  or start one on another port and set FLASHGATE_REDIS_PORT"
				exit 1
			fi
			# A freshly installed package may have started its own server on that port.
			if _fg_redis_ping "$port"; then
				_fg_log "redis: using the one the package started on 127.0.0.1:$port"
			else
				_fg_redis_start "$port"
			fi
		else
			_fg_redis_start "$port"
		fi
	fi
	export FLASHGATE_REDIS_URL="redis://127.0.0.1:$port/0"
}

_fg_redis_stop() { # port pidfile
	local port="$1" pidfile="$2" pid="" i
	if [[ -f "$pidfile" ]]; then
		pid="$(cat "$pidfile" 2>/dev/null || true)"
	fi
	_fg_log "redis: stopping the one we started on 127.0.0.1:$port"
	if _fg_have redis-cli; then
		timeout 10 redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
	elif [[ -n "$pid" ]]; then
		kill -TERM "$pid" 2>/dev/null || true
	fi
	if [[ -n "$pid" ]]; then
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			_fg_log "redis: pid $pid still running after shutdown; sending KILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$pidfile"
}

# --- Postgres -------------------------------------------------------------------------------------------

_fg_pg_bindir="" # where initdb/pg_ctl live, once found

_fg_pg_find_bin() {
	local d
	if _fg_have initdb && _fg_have pg_ctl; then
		_fg_pg_bindir="$(dirname "$(command -v pg_ctl)")"
		return 0
	fi
	# Debian keeps the server binaries off PATH; take the newest major version.
	local dirs=()
	mapfile -t dirs < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r)
	for d in "${dirs[@]}"; do
		if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
			_fg_pg_bindir="$d"
			return 0
		fi
	done
	return 1
}

_fg_pg_client_path() {
	# psql/pg_isready may be only in the server bindir (e.g. a source build): add it to PATH.
	if { ! _fg_have psql || ! _fg_have pg_isready; } && _fg_pg_find_bin; then
		PATH="$PATH:$_fg_pg_bindir"
	fi
}

_fg_pg_ready() { # port → pg_isready's status (0 accepting, 1 rejecting, 2 no response, 3 no attempt)
	local rc=0
	timeout 10 pg_isready -q -h 127.0.0.1 -p "$1" -U postgres >/dev/null 2>&1 || rc=$?
	return "$rc"
}

_fg_pg_usable() { # port
	timeout 10 psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -XtAqc 'select 1' >/dev/null 2>&1
}

_fg_pg_try_existing() { # port → 0 = usable, 1 = nothing there, exits when a server is there but unusable
	local port="$1" rc=0 i
	_fg_pg_ready "$port" || rc=$?
	if [[ $rc -eq 1 ]]; then # starting up or shutting down: give it a moment
		for ((i = 0; i < 30 && rc == 1; i++)); do
			sleep 1
			rc=0
			_fg_pg_ready "$port" || rc=$?
		done
	fi
	[[ $rc -eq 0 ]] || return 1
	if _fg_pg_usable "$port"; then
		return 0
	fi
	_fg_log "postgres: a server answers on 127.0.0.1:$port but 'psql -h 127.0.0.1 -p $port -U postgres' fails:"
	psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -XtAqc 'select 1' 2>&1 | sed 's/^/  /' >&2 || true
	_fg_log "  allow trust (or .pgpass) access for user postgres from 127.0.0.1, or set FLASHGATE_PG_PORT"
	_fg_log "  to a free port so that a private server is started there."
	exit 1
}

_fg_pg_run_as() { # user cmd… (user empty = ourselves)
	local user="$1"
	shift
	if [[ -z "$user" ]]; then
		"$@"
	elif _fg_have runuser; then
		runuser -u "$user" -- "$@"
	else
		local q
		q="$(printf '%q ' "$@")"
		su -s /bin/sh "$user" -c "$q"
	fi
}

_fg_pg_start() { # port
	local port="$1" user="" group="" pgdata="${FLASHGATE_PG_DATA:-$_fg_data/postgres}" running=""
	local logfile="$pgdata.log"
	_fg_pg_find_bin || _fg_die "initdb/pg_ctl not found"
	if _fg_is_root; then
		# Postgres refuses to run as root: run it as a system user that owns the data folder.
		if id -u postgres >/dev/null 2>&1; then
			user=postgres
		else
			if ! id -u flashgate-pg >/dev/null 2>&1; then
				_fg_log "postgres: creating system user flashgate-pg to run the server (postgres refuses root)"
				useradd -r -M -d /nonexistent -s /usr/sbin/nologin flashgate-pg ||
					_fg_die "useradd flashgate-pg failed"
			fi
			user=flashgate-pg
		fi
		group="$(id -gn "$user")"
		mkdir -p "$pgdata"
		if [[ "$(stat -c %U "$pgdata")" != "$user" ]]; then
			chown -R "$user:$group" "$pgdata"
		fi
		chmod 700 "$pgdata"
		if ! _fg_pg_run_as "$user" test -w "$pgdata"; then
			# The checkout is not reachable by that user (e.g. under /root): keep the cluster elsewhere.
			pgdata="/var/tmp/flashgate-pg-$(printf '%s' "$_fg_root" | cksum | cut -d' ' -f1)/$(basename "$pgdata")"
			logfile="$pgdata.log"
			_fg_log "postgres: $user cannot reach $_fg_data; using $pgdata instead"
			install -d -m 700 -o "$user" -g "$group" "$(dirname "$pgdata")" "$pgdata"
		fi
		touch "$logfile"
		chown "$user:$group" "$logfile"
	else
		mkdir -p "$pgdata"
		chmod 700 "$pgdata"
	fi

	if [[ ! -f "$pgdata/PG_VERSION" ]]; then
		_fg_log "postgres: initdb into $pgdata (trust auth, superuser postgres)"
		if ! _fg_pg_run_as "$user" "$_fg_pg_bindir/initdb" -D "$pgdata" --auth=trust -U postgres -E UTF8 \
			--no-locale >"$_fg_data/initdb.log" 2>&1; then
			tail -n 20 "$_fg_data/initdb.log" >&2 || true
			_fg_die "initdb failed (log: $_fg_data/initdb.log)"
		fi
	fi
	if _fg_pg_run_as "$user" "$_fg_pg_bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
		running="$(sed -n 4p "$pgdata/postmaster.pid" 2>/dev/null || true)"
		_fg_die "the server in $pgdata is already running (port ${running:-?}) but not on $port; run 'deploy/local/services.sh stop' first"
	fi
	_fg_log "postgres: starting on 127.0.0.1:$port (data $pgdata, log $logfile)"
	# No Unix socket: the system server may own the default socket folder; we only speak TCP.
	if ! _fg_pg_run_as "$user" "$_fg_pg_bindir/pg_ctl" -D "$pgdata" -l "$logfile" -w -t 60 \
		-o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='' ${FLASHGATE_PG_SERVER_OPTIONS:-}" start >/dev/null 9>&-; then
		tail -n 20 "$logfile" >&2 || true
		_fg_die "pg_ctl start failed (log: $logfile)"
	fi
	_fg_record postgres "$port" "$pgdata" "${user:--}"
	local i
	for ((i = 0; i < 300; i++)); do
		if _fg_pg_ready "$port" && _fg_pg_usable "$port"; then
			_fg_log "postgres: ready on 127.0.0.1:$port"
			_fg_renice postgres "$(head -n 1 "$pgdata/postmaster.pid" 2>/dev/null)"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$logfile" >&2 || true
	_fg_die "postgres on port $port is not ready after 30 s (log: $logfile)"
}

_fg_pg_ensure() {
	if [[ -n "${FLASHGATE_PG_BASE_URL:-}" ]]; then
		_fg_pg_client_path
		if _fg_have psql && ! timeout 10 psql "$FLASHGATE_PG_BASE_URL/postgres" -XtAqc 'select 1' >/dev/null 2>&1; then
			_fg_die "FLASHGATE_PG_BASE_URL is set ($FLASHGATE_PG_BASE_URL) but 'select 1' fails on it"
		fi
		_fg_log "postgres: using FLASHGATE_PG_BASE_URL from the environment"
		export FLASHGATE_PG_BASE_URL
		return 0
	fi
	local port="${FLASHGATE_PG_PORT:-5432}"
	_fg_pg_client_path
	if _fg_have psql && _fg_have pg_isready && _fg_pg_try_existing "$port"; then
		_fg_log "postgres: using the one already running on 127.0.0.1:$port"
	else
		if ! _fg_pg_find_bin || ! _fg_have psql || ! _fg_have pg_isready; then
			if _fg_is_root && _fg_have apt-get; then
				_fg_apt_install postgresql postgresql-client
				hash -r
				_fg_pg_client_path
			else
				_fg_log "postgres: nothing usable on 127.0.0.1:$port and the server binaries (initdb, pg_ctl) or"
				_fg_log "  the clients (psql, pg_isready) are not installed."
				_fg_log "  install them, e.g.: sudo apt-get install postgresql postgresql-client"
				_fg_log "  (macOS: brew install postgresql), or start a server with trust auth for user"
				_fg_log "  postgres on 127.0.0.1 and set FLASHGATE_PG_PORT"
				exit 1
			fi
			# The package may have created and started a cluster on that port.
			if _fg_pg_try_existing "$port"; then
				_fg_log "postgres: using the one the package started on 127.0.0.1:$port"
			else
				_fg_pg_start "$port"
			fi
		else
			_fg_pg_start "$port"
		fi
	fi
	export FLASHGATE_PG_BASE_URL="postgres://postgres@127.0.0.1:$port"
}

_fg_pg_stop() { # port datadir user
	local port="$1" pgdata="$2" user="$3"
	[[ "$user" == "-" ]] && user=""
	_fg_log "postgres: stopping the one we started on 127.0.0.1:$port ($pgdata)"
	if ! _fg_pg_find_bin; then
		_fg_log "postgres: pg_ctl not found; cannot stop $pgdata"
		return 0
	fi
	if [[ -f "$pgdata/postmaster.pid" ]]; then
		_fg_pg_run_as "$user" "$_fg_pg_bindir/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			_fg_log "postgres: pg_ctl stop failed (already stopped?)"
	fi
}

# --- modes ----------------------------------------------------------------------------------------------

_fg_ensure() {
	_fg_started_now=""
	_fg_lock
	_fg_redis_ensure
	_fg_pg_ensure
	_fg_unlock
	export FLASHGATE_SERVICES_STARTED="$_fg_started_now"
}

_fg_stop() { # [service…]
	_fg_lock
	if [[ ! -s "$_fg_started_file" ]]; then
		_fg_unlock
		return 0
	fi
	local want=" $* " service port a b lines=()
	mapfile -t lines <"$_fg_started_file"
	local line
	for line in "${lines[@]}"; do
		read -r service port a b <<<"$line" || true
		[[ -n "${service:-}" ]] || continue
		if [[ $# -gt 0 && "$want" != *" $service "* ]]; then
			continue
		fi
		case "$service" in
		redis) _fg_redis_stop "$port" "$a" ;;
		postgres) _fg_pg_stop "$port" "$a" "${b:--}" ;;
		*) _fg_log "unknown entry in $_fg_started_file: $line" ;;
		esac
		_fg_unrecord "$service" "$port"
	done
	[[ -s "$_fg_started_file" ]] || rm -f "$_fg_started_file"
	_fg_unlock
}

_fg_createdb() { # name
	local name="${1:-}" base exists
	[[ "$name" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || _fg_die "createdb: need a database name of letters, digits and _ (got '$name')"
	_fg_pg_client_path
	_fg_have psql || _fg_die "createdb: psql is not installed"
	base="${FLASHGATE_PG_BASE_URL:-postgres://postgres@127.0.0.1:${FLASHGATE_PG_PORT:-5432}}"
	exists="$(psql "$base/postgres" -XtAqc "select 1 from pg_database where datname = '$name'")" ||
		_fg_die "createdb: cannot query $base/postgres"
	if [[ "$exists" == "1" ]]; then
		_fg_log "postgres: database $name exists"
		return 0
	fi
	if ! psql "$base/postgres" -XqAc "create database \"$name\"" >/dev/null 2>"$_fg_data/createdb.err"; then
		# Someone may have created it at the same moment.
		exists="$(psql "$base/postgres" -XtAqc "select 1 from pg_database where datname = '$name'" 2>/dev/null || true)"
		[[ "$exists" == "1" ]] || {
			cat "$_fg_data/createdb.err" >&2
			_fg_die "createdb: could not create $name"
		}
	fi
	rm -f "$_fg_data/createdb.err"
	_fg_log "postgres: created database $name"
}

flashgate_services() {
	local mode="${1:-}"
	[[ $# -gt 0 ]] && shift
	case "$mode" in
	ensure) _fg_ensure ;;
	stop) _fg_stop "$@" ;;
	createdb)
		mkdir -p "$_fg_data"
		_fg_createdb "$@"
		;;
	*)
		printf 'usage: services.sh ensure | createdb NAME | stop [redis] [postgres]\n' >&2
		return 2
		;;
	esac
}

_fg_ensure_failed() { # exit status
	local started=()
	if [[ "$1" -ne 0 && -n "$_fg_started_now" ]]; then
		_fg_log "ensure failed; stopping what it had started ($_fg_started_now)"
		_fg_unlock
		read -ra started <<<"$_fg_started_now"
		_fg_stop "${started[@]}"
	fi
}

_fg_main() {
	local mode="${1:-}"
	if [[ "$mode" == "ensure" ]]; then
		# If anything fails half-way, stop what this call had already started.
		trap '_fg_ensure_failed $?' EXIT
		flashgate_services ensure
		trap - EXIT
		printf "export FLASHGATE_REDIS_URL='%s'\n" "$FLASHGATE_REDIS_URL"
		printf "export FLASHGATE_PG_BASE_URL='%s'\n" "$FLASHGATE_PG_BASE_URL"
		printf "export FLASHGATE_SERVICES_STARTED='%s'\n" "$FLASHGATE_SERVICES_STARTED"
	else
		flashgate_services "$@"
	fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	_fg_main "$@"
fi
