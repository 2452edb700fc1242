# flashgate — local stack, tests and benchmarks. `make` lists the targets.
# Scripts live in deploy/local/; they use Redis and Postgres where they already listen and start their own
# under .data/ otherwise (see deploy/local/services.sh).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Go may live outside PATH (as on CI machines).
export PATH := $(PATH):/usr/local/go/bin
GO ?= go

# Every go command builds with -trimpath: no checkout's directory goes into what it compiles, so Go's cache
# serves a fresh clone (or a second worktree) all it compiled from the same sources before, and binaries name
# their files by module path. GOFLAGS from the environment still apply.
export GOFLAGS := -trimpath $(GOFLAGS)

# Every package of every module go.work uses: the product (the root) and the lab's nested modules, which a
# plain ./... stops at.
PKGS = $(shell $(GO) list -m -f '{{.Dir}}/...' | sed 's|^$(CURDIR)|.|')

# Extra flags for `make test`, e.g. make test GOTESTFLAGS='-run TestReserve -v'
export GOTESTFLAGS
export GOTESTPKGS

.PHONY: help run run-cluster test test-product build image bench bench-capacity bench-scaling bench-regions bench-autotune bench-reserve bench-edge bench-model chaos fmt vet clean

help: ## list the targets
	@echo "flashgate targets:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  make %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

run: ## run Redis, Postgres, origin (and edge) locally with a demo sale; Ctrl-C stops it all
	deploy/local/run.sh

run-cluster: ## the deployed shape on one machine: nginx CDN, 2 edges, 2 origins, Redis + replica + 3 Sentinels, Postgres, gateway; own network namespaces when root
	deploy/local/cluster.sh

test: ## go vet and every test against real Redis and a Postgres of its own: the product's under the race detector beside the lab's light ones, then the lab's whole stacks; GOTESTFLAGS=... passes flags
	deploy/local/test.sh

test-product: ## the product's tests alone (edge, origin, tokens, internal) without the race detector, the quick loop (40–75 s; make test installs the tools they need)
	@here=deploy/local; . deploy/local/lib.sh; use_test_services; \
	$(GO) test -count=1 -p 4 -parallel 8 $(GOTESTFLAGS) ./edge/... ./origin/... ./tokens/... ./internal/...

build: ## compile every package and put the binaries (origin, edge, sandboxgateway, bench tools) into bin/
	$(GO) build $(PKGS)
	@mkdir -p bin
	@mains="$$($(GO) list -e -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./origin ./edge/... ./deploy/sandboxgateway ./bench/... 2>/dev/null | sed '/^$$/d' || true)"; \
	if [[ -n "$$mains" ]]; then \
		echo "flashgate: building $$(echo $$mains | tr ' ' '\n' | sed 's|.*/||' | tr '\n' ' ')into bin/"; \
		$(GO) build -o bin/ $$mains; \
	else \
		echo "flashgate: no main packages yet"; \
	fi

image: ## container images of edge, origin and sandboxgateway without a Docker daemon: bin/image/oci (OCI layout) and bin/image/flashgate-images.tar (docker load); IMAGE_FLAGS=...
	$(GO) run ./deploy/imagebuild $(IMAGE_FLAGS)

bench: ## the crowd simulator: the stack as make run starts it, 100k shoppers and two bot cohorts through the edge with the defences against bots off, then on; the naive baseline; a report; CROWD_FLAGS=...
	deploy/local/crowd.sh

bench-capacity: ## capacity at the promise: burst rates 250–8,000 shoppers/s (then doubling while flashgate holds, then each design twice halfway between its highest rate held and its lowest missed) for 5,000 units against flashgate and the naive baseline on the same pinned CPUs, the highest rate each holds p99 answer ≤ 2 s, 0 5xx, 0 oversold (~5–10 min); CAPACITY_FLAGS=...
	deploy/local/capacity.sh

bench-scaling: ## the scaling law: the standard sale with 20,000 and 100,000 shoppers (same stock, same rate), flashgate and the naive baseline; CPU per process at each size, goal origin + Postgres ≤ 1.3× (~5–6 min); SCALING_FLAGS=...
	deploy/local/scaling.sh

bench-regions: ## one sale across two regions: make run-cluster with edge2 REGION_DELAY (60ms) each way from Redis, the crowd split between them, times per region; CROWD_FLAGS=...
	deploy/local/regions.sh

# bin/crowd's autotuneCommand reads these first flags as make bench-autotune itself (its compareFlags); keep the two the same.
bench-autotune: ## admission that tunes itself: the capacity (admission unthrottled), then the same sale with autotune 100–8,000/s, at a fixed rate 3× the capacity and at a quarter of it, on the stack as make run starts it with FLASHGATE_AUTOTUNE_PERIOD=2s; .data/autotune/<time>/ (~5 min); AUTOTUNE_FLAGS=...
	@here=deploy/local; . deploy/local/lib.sh; bench_pinning; \
	export FLASHGATE_TRUSTED_PROXIES="$${FLASHGATE_TRUSTED_PROXIES:-127.0.0.1/32}" FLASHGATE_AUTOTUNE_PERIOD="$${FLASHGATE_AUTOTUNE_PERIOD:-2s}"; \
	if [[ -z "$${FLASHGATE_ADMIN_TOKEN:-}" ]]; then export FLASHGATE_ADMIN_TOKEN="$$(openssl rand -base64 32)"; fi; \
	export FLASHGATE_RUN_THEN="bin/crowd -autotune-compare -autotune-min 100 -autotune-max 8000 $(AUTOTUNE_FLAGS)"; \
	exec deploy/local/run.sh

bench-reserve: ## the reserve-path benchmark (bench/reservebench): script path, durability options, HTTP path, the origin against a Redis-Lua seckill and a Postgres-serializable design (1,000 units, 20,000 accounts, 200 connections); RESERVE_FLAGS=...
	deploy/local/bench.sh ./bench/reservebench $(RESERVE_FLAGS)

bench-edge: ## run the edge benchmarks (bench/edgebench) against real Redis and Postgres
	deploy/local/bench.sh ./bench/edgebench

bench-model: ## the capacity model: the newest reports under .data/ → docs/capacity-inputs.json → the fleet in docs/CAPACITY.md; MODEL_FLAGS=-check compares only
	$(GO) run ./bench/model $(MODEL_FLAGS)

chaos: ## break things under a running sale (kills, Postgres stop, Redis emptied/slowed/failed over, gateway, webhooks) and write docs/RELIABILITY.md; CHAOS_FLAGS=...
	$(GO) run ./bench/chaos $(CHAOS_FLAGS)

fmt: ## gofmt every Go file
	$(GO) fmt $(PKGS)

vet: ## go vet every package
	$(GO) vet $(PKGS)

clean: ## stop services that the scripts started, then remove bin/ and .data/
	@if [[ -f .data/started ]]; then deploy/local/services.sh stop; fi
	rm -rf bin .data
