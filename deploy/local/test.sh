#!/usr/bin/env bash
# `make test`: go vet and every test against real Redis and Postgres.
#
# Starts a Redis and a Postgres of its own (use_test_services in lib.sh: the checkout's ports, Postgres with 400
# connections and no flushing, both at nice -5 as root) through services.sh, and exports
#   FLASHGATE_TEST_REDIS_URL     redis://127.0.0.1:PORT/0   (tests isolate by key prefix)
#   FLASHGATE_TEST_POSTGRES_URL  postgres://postgres@127.0.0.1:PORT/flashgate_test?sslmode=disable
#                                (tests isolate by schema)
# then runs `go test -vet=all -count=1 -timeout 15m $GOTESTFLAGS $GOTESTPKGS` (every module of go.work when
# GOTESTPKGS is empty; the product's packages under -race and, at the same time, the lab's light ones without it,
# then the lab's whole-stack suites), stops whatever services it started, and fails if any go test failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# shellcheck source=lib.sh
. "$here/lib.sh"
need_go

# The shopper page's browser test (edge/internal/pagetest) drives headless Chromium and fails without it;
# it looks for the same commands as here.
have_chromium() {
	local name
	for name in chromium chromium-browser google-chrome google-chrome-stable; do
		command -v "$name" >/dev/null 2>&1 && return 0
	done
	return 1
}
if ! have_chromium; then
	if [[ "$(id -u)" -ne 0 ]]; then
		log "error: Chromium is not installed; the page test needs it (Debian: sudo apt-get install chromium)"
		exit 1
	fi
	log "the page test needs Chromium"
	apt_install --with-recommends chromium || exit 1
	log "installed $(chromium --version 2>/dev/null || echo chromium)"
fi

# The CDN test (edge/internal/cdntest) runs nginx with deploy/cdn's configuration and fails without it; it
# also looks in /usr/sbin, where Debian puts nginx and a user's PATH may not reach.
if ! command -v nginx >/dev/null 2>&1 && [[ ! -x /usr/sbin/nginx ]]; then
	if [[ "$(id -u)" -ne 0 ]]; then
		log "error: nginx is not installed; the CDN test needs it (Debian: sudo apt-get install nginx-light)"
		exit 1
	fi
	log "the CDN test needs nginx (nginx-light, or nginx)"
	apt_install --with-recommends nginx-light || apt_install --with-recommends nginx || exit 1
fi

# The alert rules' test (deploy/prometheus) runs promtool on them and their unit tests, and fails without it;
# Debian ships it in the prometheus package.
if ! command -v promtool >/dev/null 2>&1; then
	if [[ "$(id -u)" -ne 0 ]]; then
		log "error: promtool is not installed; the alert rules' test needs it (Debian: sudo apt-get install prometheus)"
		exit 1
	fi
	log "the alert rules' test needs promtool (Debian's prometheus package)"
	apt_install prometheus || exit 1
	log "installed $(promtool --version 2>/dev/null | head -n 1 || echo promtool)"
fi

# The Stripe adapter's tests (origin/internal/payment/stripepay) run against stripe-mock, Stripe's mock server
# built from its OpenAPI description, and fail without it; they look for it where this does: PATH, then go
# install's folders ($GOBIN, else each $GOPATH's bin).
stripe_mock_module="github.com/stripe/stripe-mock@v0.203.0"
have_stripe_mock() {
	local dir gopath
	command -v stripe-mock >/dev/null 2>&1 && return 0
	dir="$(go env GOBIN)"
	[[ -n "$dir" && -x "$dir/stripe-mock" ]] && return 0
	IFS=: read -ra gopath <<<"$(go env GOPATH)"
	for dir in "${gopath[@]}"; do
		[[ -x "$dir/bin/stripe-mock" ]] && return 0
	done
	return 1
}
if ! have_stripe_mock; then
	log "installing stripe-mock for the Stripe adapter's tests (go install $stripe_mock_module)"
	if ! go install "$stripe_mock_module"; then
		log "error: go install could not install stripe-mock"
		exit 1
	fi
	stripe_mock_dir="$(go env GOBIN)"
	[[ -n "$stripe_mock_dir" ]] || stripe_mock_dir="$(go env GOPATH | cut -d: -f1)/bin"
	log "installed stripe-mock in $stripe_mock_dir"
fi

use_test_services
log "FLASHGATE_TEST_REDIS_URL=$FLASHGATE_TEST_REDIS_URL"
log "FLASHGATE_TEST_POSTGRES_URL=$FLASHGATE_TEST_POSTGRES_URL"

read -ra test_flags <<<"${GOTESTFLAGS:-}"
if [[ -n "${GOTESTPKGS:-}" ]]; then
	read -ra test_pkgs <<<"$GOTESTPKGS"
else
	mapfile -t test_pkgs < <(workspace_pkgs)
fi

# phase_took logs how long the phase that began at $1 (a $SECONDS) took, and the run so far: where a
# slow run spent its time, in its own log.
phase_took() { log "$2 took $((SECONDS - $1)) s ($SECONDS s so far)"; }

# go vet runs inside go test (-vet=all: every check, not go test's short list), on each package as it is built
# for its tests, rather than as a pass of its own over every package first (45 s here): a package with a vet
# finding fails without running its tests; the others run.

# The product module's tests run under the race detector. The lab's (bench, deploy, the page tests: whole
# stacks, browsers and simulators driving the binaries) run without it: under it their
# simulators took most of the run's CPU, checking the lab's code, not the product's. GOTESTPKGS runs what it
# names, all under the race detector.
race_pkgs=("${test_pkgs[@]}")
light_pkgs=() # the lab's that wait more than they compute: beside the product's
heavy_pkgs=() # the lab's whole-stack suites, which load both cores: after them
if [[ -z "${GOTESTPKGS:-}" ]]; then
	# The slowest packages first: go test starts them in the order named (naming each once), and a long one
	# started last is the phase's tail.
	race_pkgs=(./edge/internal/app ./origin/internal/app ./edge/internal/cdntest ./...)
	heavy_pkgs=(./bench/chaos ./bench/crowd ./edge/internal/pagetest)
	lab_patterns=()
	for p in "${test_pkgs[@]}"; do
		[[ "$p" == ./... ]] || lab_patterns+=("$p")
	done
	mapfile -t light_pkgs < <(
		echo ./deploy/local/clustertest
		echo ./bench/internal/crowdsim
		go list -f '{{.Dir}}' "${lab_patterns[@]}" | sed "s|^$root|.|" |
			grep -v -x -e ./deploy/local/clustertest -e ./bench/internal/crowdsim -e ./bench/chaos -e ./bench/crowd -e ./edge/internal/pagetest
	)
fi
# A race-built program sleeps a second before it exits (the race runtime's atexit_sleep_ms, for races in
# threads still running at exit): a second of every test binary's, about a hundred of them, 26 s of the
# product's phase here. Options given in GORACE still win.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"
# cluster.sh's test builds ten binaries into bin/, and go build relinks only those out of date; with the version
# control stamp in them (the commit, whether the tree is modified), every commit or edit put all ten out of date:
# 21 s of CPU in the next run. Nothing reads the stamp; make build and make image still write it.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"
# compile_first compiles every package a phase's tests need, test files included, without linking or running
# anything (go list -export builds the packages for their export data; with Go's cache warm, 1–7 s here):
# compiled beside the tests, a fresh clone's packages (minutes of both cores) starved the timed tests that
# started first. Build flags in GOTESTFLAGS (-tags) are not passed: go test then compiles its variant itself.
compile_first() { # [-race] packages
	local started=$SECONDS
	if ! go list -test -export -deps "$@" >/dev/null; then
		log "compiling failed (go list -test -export -deps $*): go test reports it, package by package"
		return
	fi
	log "compiled in $((SECONDS - started)) s (go list -test -export -deps $*)"
}

# run_tests NAME GO-TEST-FLAGS... -- PACKAGES...: go test, logging how long it took; its exit status.
run_tests() {
	local name="$1" started=$SECONDS status=0 flags=()
	shift
	while [[ "$1" != -- ]]; do
		flags+=("$1")
		shift
	done
	shift
	log "go test ${flags[*]} ${test_flags[*]} $* ($name; GORACE=$GORACE)"
	go test "${flags[@]}" "${test_flags[@]}" "$@" || status=$?
	phase_took "$started" "$name (exit status $status)"
	return "$status"
}

# The product's tests (under -race, four packages at a time, four tests at a time in each) and the lab's light
# packages (cluster.sh's runs, simulators against stubs, deploy checks) run at once: both mostly wait (holds
# expiring, reconcilers, failovers, sales played in real time). Then the lab's heavy suites, three at once:
# the crowd against the real binaries, the chaos scenarios, the pages in Chromium. Beside the product's race
# run those starved its timed tests (cdntest's collapsed loads, a late payment's refund, Redis answering the
# edges' ticks too late) for 5 s gained; one after the other everything took 57 + 131 s here, this way 72 + 81.
compile_first -race "${race_pkgs[@]}"
if [[ ${#light_pkgs[@]} -gt 0 ]]; then
	compile_first "${light_pkgs[@]}" "${heavy_pkgs[@]}"
fi
status=0
light_status=0
if [[ ${#light_pkgs[@]} -gt 0 ]]; then
	run_tests "the lab's light tests" -vet=all -count=1 -p 2 -parallel 4 -timeout 15m -- "${light_pkgs[@]}" &
	light=$!
fi
run_tests "the product's tests" -race -vet=all -count=1 -p 4 -parallel 4 -timeout 15m -- "${race_pkgs[@]}" || status=$?
if [[ ${#light_pkgs[@]} -gt 0 ]]; then
	wait "$light" || light_status=$?
fi
heavy_status=0
if [[ ${#heavy_pkgs[@]} -gt 0 ]]; then
	run_tests "the lab's whole-stack tests" -vet=all -count=1 -p 3 -parallel 4 -timeout 15m -- "${heavy_pkgs[@]}" || heavy_status=$?
fi
if [[ $status -ne 0 || $light_status -ne 0 || $heavy_status -ne 0 ]]; then
	log "tests failed: exit status $status (the product's), $light_status (the lab's light), $heavy_status (the lab's whole-stack)"
	exit 1
fi
# Allocation counts mean nothing under the race detector (it makes sync.Pool
# drop items): the tests that pin them exactly are built without -race only
# (//go:build !race) and run here.
alloc_pkgs=(./edge/internal/challenge/)
log "go test -vet=all -count=1 -run Allocates ${alloc_pkgs[*]} (allocation counts, without -race)"
if ! go test -vet=all -count=1 -run 'Allocates' "${alloc_pkgs[@]}"; then
	log "allocation tests failed"
	exit 1
fi
log "vet and tests passed"
