#!/usr/bin/env bash
# `make run`: the whole stack on this machine, in the foreground until SIGINT/SIGTERM.
#
# Uses (or starts) Redis and Postgres through services.sh, builds bin/origin, bin/edge, bin/sandboxgateway (and
# the main packages under bench/), starts the sandbox payment gateway, origin and edge, creates a demo sale of its
# own that opens within seconds (demosale.sh) and prints the URLs.
# On SIGINT/SIGTERM it stops every process it started (TERM, up to 10 s, then KILL) and the services it started.
#
# The stack runs in dev mode (FLASHGATE_DEV=1), which the binaries allow on loopback addresses only: everything
# listens on 127.0.0.1. To reach it from elsewhere set the addresses and FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1 (the
# binaries then warn that anyone who reaches them can sign in as anyone).
#
# Environment (all optional):
#   FLASHGATE_ORIGIN_ADDR=127.0.0.1:9090  FLASHGATE_ORIGIN_ADMIN_ADDR=127.0.0.1:9091
#   FLASHGATE_EDGE_ADDR=127.0.0.1:8080    FLASHGATE_EDGE_ADMIN_ADDR=127.0.0.1:8081
#   FLASHGATE_GATEWAY_ADDR=127.0.0.1:9300 (the sandbox payment gateway)
#   FLASHGATE_PAYMENT_PROVIDER=sandbox    the provider the origin takes payments through: sandbox, or stripe or razorpay, which
#                                 the sandbox gateway then plays (its API, pages and webhooks, offline; docs/PAYMENTS.md)
#   FLASHGATE_RUN_THEN="command"  run it once the stack is up, then stop everything (its exit status is ours);
#                                 it finds the demo sale's id in FLASHGATE_DEMO_SALE_ID
#   FLASHGATE_STACK_CPUS=0        run the stack's processes on these CPUs (taskset -c), and pin Redis and Postgres
#                                 there too for the run (their own affinity comes back when it stops)
#   FLASHGATE_RUN_THEN_CPUS=1     run FLASHGATE_RUN_THEN's command on these CPUs (make bench: bench_pinning in lib.sh)
#   FLASHGATE_CHECKOUT_NICE=10    run the checkout (origin, the sandbox gateway) at this nice value and renice
#                                 Postgres to it for the run, so that on shared CPUs the waiting room goes first
#   FLASHGATE_DEMO_STARTS_IN=15   seconds from its creation to the demo sale's start (see demosale.sh)
#   FLASHGATE_EDGE_ADMIN_TOKEN, FLASHGATE_ORIGIN_ADMIN_TOKEN, FLASHGATE_TOKEN_KEYS,
#   FLASHGATE_DEV_USER_TOKEN_SECRET, FLASHGATE_GATEWAY_API_KEY,
#   FLASHGATE_GATEWAY_WEBHOOK_SECRET, FLASHGATE_GATEWAY_CONTROL_TOKEN        generated when unset
#   FLASHGATE_ADMIN_TOKEN         one admin token for both tiers instead of a token each
#   FLASHGATE_REDIS_PORT, FLASHGATE_PG_PORT                                   see services.sh
# FLASHGATE_RUN_THEN's command also gets the dev user-token secret as FLASHGATE_USER_TOKEN_SECRET: it plays the
# shop (make bench's crowd signs its shoppers' user tokens with it); and FLASHGATE_GATEWAY_CONTROL_TOKEN, which the
# sandbox gateway's /sandbox/* routes require (the crowd pays with it). Only the gateway and that command get the
# control token, and it is printed with the admin tokens.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# shellcheck source=lib.sh
. "$here/lib.sh"

command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
for tool in go curl openssl; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
done

export FLASHGATE_ORIGIN_ADDR="${FLASHGATE_ORIGIN_ADDR:-127.0.0.1:9090}"
export FLASHGATE_ORIGIN_ADMIN_ADDR="${FLASHGATE_ORIGIN_ADMIN_ADDR:-127.0.0.1:9091}"
export FLASHGATE_EDGE_ADDR="${FLASHGATE_EDGE_ADDR:-127.0.0.1:8080}"
export FLASHGATE_EDGE_ADMIN_ADDR="${FLASHGATE_EDGE_ADMIN_ADDR:-127.0.0.1:8081}"
export FLASHGATE_GATEWAY_ADDR="${FLASHGATE_GATEWAY_ADDR:-127.0.0.1:9300}"
# Our own stop gives each process 10 s before KILL: let it finish draining before that.
export FLASHGATE_SHUTDOWN_TIMEOUT="${FLASHGATE_SHUTDOWN_TIMEOUT:-8s}"

# addr_port ":9090" → 9090; addr_url ":9090" → http://127.0.0.1:9090 (wildcard hosts become loopback).
addr_port() { printf '%s' "${1##*:}"; }
addr_url() {
	local host="${1%:*}"
	case "$host" in "" | 0.0.0.0 | "[::]" | "::") host=127.0.0.1 ;; esac
	printf 'http://%s:%s' "$host" "$(addr_port "$1")"
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- stopping everything we started ---------------------------------------------------------------------

pids=()  # processes we started, in start order
names=() # their names, for messages
services_started=""
services_ensured=""

stop_proc() { # pid name
	local pid="$1" name="$2" i
	kill -0 "$pid" 2>/dev/null || return 0
	log "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "$name did not stop within 10 s; sending KILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	trap '' INT TERM # a second Ctrl-C must not cut the cleanup short
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		stop_proc "${pids[$i]}" "${names[$i]}"
	done
	unpin_listeners
	if [[ -n "$services_started" ]]; then
		# shellcheck disable=SC2086 # a list of service names
		"$here/services.sh" stop $services_started || true
	elif [[ -n "$services_ensured" ]]; then
		log "leaving Redis and Postgres running (they were running before)"
	fi
	log "stopped"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM



# --- services ---------------------------------------------------------------------------------------------

services_env="$("$here/services.sh" ensure)"
eval "$services_env"
services_started="$FLASHGATE_SERVICES_STARTED"
services_ensured=1
"$here/services.sh" createdb flashgate

export FLASHGATE_POSTGRES_URL="$FLASHGATE_PG_BASE_URL/flashgate?sslmode=disable"
export FLASHGATE_REDIS_URL

# The stack's CPUs: ours start under taskset (which execs them: $! stays their pid), Redis and Postgres are
# pinned where they run.
pinned=()
if [[ -n "${FLASHGATE_STACK_CPUS:-}" ]]; then
	command -v taskset >/dev/null 2>&1 || die "FLASHGATE_STACK_CPUS is set but taskset is not installed"
	pinned=(taskset -c "$FLASHGATE_STACK_CPUS")
	redis_port="${FLASHGATE_REDIS_URL##*:}"
	redis_port="${redis_port%%/*}"
	pg_port="${FLASHGATE_PG_BASE_URL##*:}"
	pin_listener "$FLASHGATE_STACK_CPUS" "$redis_port"
	pin_listener "$FLASHGATE_STACK_CPUS" "${pg_port%%/*}"
fi
# The checkout's priority: ours start under nice, Postgres is reniced where it runs (and put back at the end).
mapfile -t checkout_nice < <(nice_prefix "${FLASHGATE_CHECKOUT_NICE:-0}")
if [[ ${#checkout_nice[@]} -gt 0 ]]; then
	pg_port="${FLASHGATE_PG_BASE_URL##*:}"
	nice_listener "$FLASHGATE_CHECKOUT_NICE" "${pg_port%%/*}"
fi

# --- secrets and dev mode ---------------------------------------------------------------------------------

ensure_admin_tokens
if [[ -z "${FLASHGATE_TOKEN_KEYS:-}" ]]; then
	FLASHGATE_TOKEN_KEYS="k1:$(openssl rand -base64 32)"
	log "generated FLASHGATE_TOKEN_KEYS (kid k1)"
fi
# Dev mode signs (POST /v1/dev/login) and checks user tokens with a secret of its own and refuses the shop's.
if [[ -n "${FLASHGATE_USER_TOKEN_SECRET:-}${FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE:-}" ]]; then
	log "dev mode: not passing FLASHGATE_USER_TOKEN_SECRET / FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE on (set FLASHGATE_DEV_USER_TOKEN_SECRET)"
	unset FLASHGATE_USER_TOKEN_SECRET FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE
fi
if [[ -z "${FLASHGATE_DEV_USER_TOKEN_SECRET:-}" ]]; then
	FLASHGATE_DEV_USER_TOKEN_SECRET="$(openssl rand -base64 32)"
	log "generated FLASHGATE_DEV_USER_TOKEN_SECRET"
fi
if [[ -z "${FLASHGATE_GATEWAY_API_KEY:-}" ]]; then
	FLASHGATE_GATEWAY_API_KEY="sk_sandbox_$(openssl rand -hex 16)"
	log "generated FLASHGATE_GATEWAY_API_KEY"
fi
if [[ -z "${FLASHGATE_GATEWAY_WEBHOOK_SECRET:-}" ]]; then
	FLASHGATE_GATEWAY_WEBHOOK_SECRET="whsec_$(openssl rand -hex 24)"
	log "generated FLASHGATE_GATEWAY_WEBHOOK_SECRET"
fi
# Not exported: the gateway and FLASHGATE_RUN_THEN's command get it, origin and edge have no use for it.
if [[ -z "${FLASHGATE_GATEWAY_CONTROL_TOKEN:-}" ]]; then
	FLASHGATE_GATEWAY_CONTROL_TOKEN="ctl_sandbox_$(openssl rand -hex 16)"
	log "generated FLASHGATE_GATEWAY_CONTROL_TOKEN"
fi
export FLASHGATE_EDGE_ADMIN_TOKEN FLASHGATE_ORIGIN_ADMIN_TOKEN FLASHGATE_TOKEN_KEYS FLASHGATE_DEV_USER_TOKEN_SECRET
export FLASHGATE_GATEWAY_API_KEY FLASHGATE_GATEWAY_WEBHOOK_SECRET
export FLASHGATE_LINE_AUDIENCE="${FLASHGATE_LINE_AUDIENCE:-flashgate-local}"
export FLASHGATE_DEV=1

# --- build ------------------------------------------------------------------------------------------------

main_pkgs() { # patterns… → the import paths among them that are main packages
	go list -e -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' "$@" 2>/dev/null | sed '/^$/d' || true
}

[[ -n "$(main_pkgs ./origin)" ]] || die "./origin is not a main package (yet): nothing to run"
mkdir -p bin .data
log "building bin/origin"
go build -o bin/ ./origin
mapfile -t extra_mains < <(main_pkgs ./edge ./deploy/sandboxgateway ./bench/...)
if [[ ${#extra_mains[@]} -gt 0 ]]; then
	log "building ${extra_mains[*]##*/} into bin/"
	go build -o bin/ "${extra_mains[@]}"
fi
have_edge=""
have_gateway=""
for pkg in "${extra_mains[@]}"; do
	case "$pkg" in
	*/edge) have_edge=1 ;;
	*/sandboxgateway) have_gateway=1 ;;
	esac
done

origin_url="$(addr_url "$FLASHGATE_ORIGIN_ADDR")"
origin_admin_url="$(addr_url "$FLASHGATE_ORIGIN_ADMIN_ADDR")"
edge_url="$(addr_url "$FLASHGATE_EDGE_ADDR")"
edge_admin_url="$(addr_url "$FLASHGATE_EDGE_ADMIN_ADDR")"
gateway_url="$(addr_url "$FLASHGATE_GATEWAY_ADDR")"

ports=("$(addr_port "$FLASHGATE_ORIGIN_ADDR")" "$(addr_port "$FLASHGATE_ORIGIN_ADMIN_ADDR")")
if [[ -n "$have_edge" ]]; then
	ports+=("$(addr_port "$FLASHGATE_EDGE_ADDR")" "$(addr_port "$FLASHGATE_EDGE_ADMIN_ADDR")")
fi
if [[ -n "$have_gateway" ]]; then
	ports+=("$(addr_port "$FLASHGATE_GATEWAY_ADDR")")
fi
for port in "${ports[@]}"; do
	if port_busy "$port"; then
		die "port $port is already in use (another 'make run'?); set FLASHGATE_*_ADDR to other ports"
	fi
done

# --- sandbox payment gateway --------------------------------------------------------------------------------

if [[ -n "$have_gateway" ]]; then
	gateway_log="$root/.data/sandboxgateway.log"
	: >"$gateway_log"
	# The gateway posts its webhooks through the edge (which passes them to origin untouched), as a real
	# gateway would reach the shop; origin talks to its API directly.
	export FLASHGATE_GATEWAY_PUBLIC_URL="${FLASHGATE_GATEWAY_PUBLIC_URL:-$gateway_url}"
	export FLASHGATE_GATEWAY_WEBHOOK_URL="${FLASHGATE_GATEWAY_WEBHOOK_URL:-$edge_url/v1/payments/webhook}"
	export FLASHGATE_GATEWAY_URL="${FLASHGATE_GATEWAY_URL:-$gateway_url}"
	export FLASHGATE_PAYMENT_RETURN_URL="${FLASHGATE_PAYMENT_RETURN_URL:-$edge_url/}"
	# The provider the origin talks to is the sandbox playing it: its API at the sandbox's address, under the
	# sandbox's key and webhook secret.
	case "${FLASHGATE_PAYMENT_PROVIDER:=sandbox}" in
	sandbox) export FLASHGATE_GATEWAY_PERSONALITY=flashgate ;;
	stripe)
		export FLASHGATE_GATEWAY_PERSONALITY=stripe FLASHGATE_STRIPE_API_URL="$gateway_url"
		export FLASHGATE_STRIPE_SECRET_KEY="$FLASHGATE_GATEWAY_API_KEY" FLASHGATE_STRIPE_WEBHOOK_SECRET="$FLASHGATE_GATEWAY_WEBHOOK_SECRET"
		;;
	razorpay)
		export FLASHGATE_GATEWAY_PERSONALITY=razorpay FLASHGATE_RAZORPAY_API_URL="$gateway_url" FLASHGATE_RAZORPAY_KEY_ID=rzp_test_SandboxGateway
		export FLASHGATE_RAZORPAY_KEY_SECRET="$FLASHGATE_GATEWAY_API_KEY" FLASHGATE_RAZORPAY_WEBHOOK_SECRET="$FLASHGATE_GATEWAY_WEBHOOK_SECRET"
		;;
	*) die "FLASHGATE_PAYMENT_PROVIDER=$FLASHGATE_PAYMENT_PROVIDER: make run plays sandbox, stripe or razorpay" ;;
	esac
	export FLASHGATE_PAYMENT_PROVIDER
	log "payments: $FLASHGATE_PAYMENT_PROVIDER (the sandbox gateway plays it)"
	log "starting the sandbox payment gateway on $FLASHGATE_GATEWAY_ADDR (log $gateway_log)"
	# The sandbox runs with the checkout: the load generator's CPU is the one a benchmark keeps for the shoppers
	# (a deployment's gateway is someone else's machines; on this one it shares the stack's).
	FLASHGATE_GATEWAY_CONTROL_TOKEN="$FLASHGATE_GATEWAY_CONTROL_TOKEN" ${pinned[@]+"${pinned[@]}"} ${checkout_nice[@]+"${checkout_nice[@]}"} bin/sandboxgateway >>"$gateway_log" 2>&1 &
	pids+=("$!")
	names+=(sandboxgateway)
	wait_healthy "$gateway_url/healthz" "$!" "sandbox gateway" "$gateway_log"
else
	unset FLASHGATE_GATEWAY_API_KEY # no gateway: origin runs with orders and payments off
fi

# --- origin -----------------------------------------------------------------------------------------------

origin_log="$root/.data/origin.log"
: >"$origin_log"
log "starting origin on $FLASHGATE_ORIGIN_ADDR, admin on $FLASHGATE_ORIGIN_ADMIN_ADDR (log $origin_log)"
${pinned[@]+"${pinned[@]}"} ${checkout_nice[@]+"${checkout_nice[@]}"} bin/origin >>"$origin_log" 2>&1 &
pids+=("$!")
names+=(origin)
# /readyz, not /healthz: the origin answers before it has reached Redis and Postgres, and the demo sale needs them.
wait_healthy "$origin_admin_url/readyz" "$!" origin "$origin_log"

# --- the demo sale ----------------------------------------------------------------------------------------

# A sale of its own for every run, opening within seconds: the database may hold the demo sales of earlier
# runs, long ended.
sale_id="$("$here/demosale.sh" "$origin_admin_url" "$origin_url")" || {
	tail_log "$origin_log"
	die "could not create the demo sale"
}

# --- edge -------------------------------------------------------------------------------------------------

if [[ -n "$have_edge" ]]; then
	edge_log="$root/.data/edge.log"
	: >"$edge_log"
	log "starting edge on $FLASHGATE_EDGE_ADDR, admin on $FLASHGATE_EDGE_ADMIN_ADDR (log $edge_log)"
	FLASHGATE_ORIGIN_URL="${FLASHGATE_ORIGIN_URL:-$origin_url}" ${pinned[@]+"${pinned[@]}"} bin/edge >>"$edge_log" 2>&1 &
	pids+=("$!")
	names+=(edge)
	wait_healthy "$edge_admin_url/healthz" "$!" edge "$edge_log"
else
	log "no edge main package yet: running origin only"
fi

# --- what to do with it -----------------------------------------------------------------------------------

[[ -n "${FLASHGATE_RUN_THEN:-}" ]] || {
	echo
	echo "flashgate is running (Ctrl-C stops everything it started)"
	echo
	if [[ -n "$have_edge" ]]; then
		echo "  shop (edge)        $edge_url/?sale=$sale_id        sale: $edge_url/v1/sales/$sale_id"
		echo "  edge admin         $edge_admin_url        metrics: $edge_admin_url/metrics"
		echo "  ops dashboard      $edge_admin_url/admin/dashboard        (sign in with the edge admin token below)"
	fi
	echo "  origin             $origin_url        sale: $origin_url/v1/sales/$sale_id"
	if [[ -n "$have_gateway" ]]; then
		echo "  payment gateway    $gateway_url        (sandbox playing $FLASHGATE_PAYMENT_PROVIDER) intents: $gateway_url/sandbox/intents (gateway token below)"
	fi
	echo "  origin admin       $origin_admin_url        metrics: $origin_admin_url/metrics"
	echo "  demo sale ledger   $origin_admin_url/admin/sales/$sale_id/ledger"
	echo "  logs               .data/origin.log${have_edge:+, .data/edge.log}${have_gateway:+, .data/sandboxgateway.log}"
	echo "  redis              $FLASHGATE_REDIS_URL"
	echo "  postgres           $FLASHGATE_POSTGRES_URL"
	echo
	if [[ -n "$have_edge" ]]; then
		echo "  edge admin token   $FLASHGATE_EDGE_ADMIN_TOKEN"
	fi
	echo "  origin admin token $FLASHGATE_ORIGIN_ADMIN_TOKEN"
	if [[ -n "$have_gateway" ]]; then
		echo "  gateway token      $FLASHGATE_GATEWAY_CONTROL_TOKEN (control token of the sandbox's /sandbox/* routes)"
	fi
	echo "  demo sale          $sale_id, open from ${FLASHGATE_DEMO_STARTS_IN:-15} s after it was created, for two hours"
	echo
	cat <<EOF
  # the ledger:
  curl -s -H 'Authorization: Bearer $FLASHGATE_ORIGIN_ADMIN_TOKEN' $origin_admin_url/admin/sales/$sale_id/ledger
  # a dev admission token for alice, then a reserve with it (once the sale has started):
  ADM=\$(curl -s -X POST -H 'Authorization: Bearer $FLASHGATE_ORIGIN_ADMIN_TOKEN' -H 'Content-Type: application/json' \\
    -d '{"sale_id":"$sale_id","user_id":"alice"}' $origin_admin_url/admin/dev/admission-token \\
    | sed -n 's/.*"admission_token":"\([^"]*\)".*/\1/p')
  curl -s -X POST -H "Authorization: Bearer \$ADM" -H 'Content-Type: application/json' \\
    -d '{"sku":"sneaker-42","idempotency_key":"alice-1"}' $origin_url/v1/sales/$sale_id/reserve
EOF
	if [[ -n "$have_edge" ]]; then
		echo "  # or through the edge: $edge_url/v1/sales/$sale_id/reserve"
	fi
	if [[ -n "$have_gateway" ]]; then
		echo "  # the sandbox gateway's intents (POST $gateway_url/sandbox/intents/<intent_id>/pay pays one):"
		echo "  curl -s -H 'Authorization: Bearer $FLASHGATE_GATEWAY_CONTROL_TOKEN' $gateway_url/sandbox/intents"
	fi
	echo
}

# --- or run one command against the stack, then stop it all (make bench) ---------------------------------

if [[ -n "${FLASHGATE_RUN_THEN:-}" ]]; then
	export FLASHGATE_CROWD_EDGE_URL="$edge_url" FLASHGATE_CROWD_EDGE_ADMIN_URL="$edge_admin_url"
	export FLASHGATE_CROWD_ORIGIN_ADMIN_URL="$origin_admin_url"
	export FLASHGATE_DEMO_SALE_ID="$sale_id"
	log "running: $FLASHGATE_RUN_THEN"
	then_pinned=()
	if [[ -n "${FLASHGATE_RUN_THEN_CPUS:-}" ]]; then
		then_pinned=(taskset -c "$FLASHGATE_RUN_THEN_CPUS")
	fi
	set +e
	FLASHGATE_USER_TOKEN_SECRET="$FLASHGATE_DEV_USER_TOKEN_SECRET" FLASHGATE_GATEWAY_CONTROL_TOKEN="$FLASHGATE_GATEWAY_CONTROL_TOKEN" \
		${then_pinned[@]+"${then_pinned[@]}"} bash -c "$FLASHGATE_RUN_THEN"
	rc=$?
	set -e
	exit "$rc"
fi

# --- foreground until a signal, or until one of ours dies ------------------------------------------------

while :; do
	wait -n "${pids[@]}" || true
	for i in "${!pids[@]}"; do
		if ! kill -0 "${pids[$i]}" 2>/dev/null; then
			log "${names[$i]} exited unexpectedly"
			tail_log "$root/.data/${names[$i]}.log"
			exit 1
		fi
	done
done
