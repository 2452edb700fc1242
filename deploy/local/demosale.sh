#!/usr/bin/env bash
# Creates a fresh demo sale on the origin and prints its id: `make run` calls it once the origin is up.
#
# Every run gets a sale of its own, named after the time (demo-YYYYMMDD-HHMMSS, UTC) and opening a few seconds
# from now, so a database that holds the demo sales of earlier runs, long ended, still gives a working demo.
#
# Usage: demosale.sh ORIGIN_ADMIN_URL ORIGIN_URL
# Environment:
#   FLASHGATE_ORIGIN_ADMIN_TOKEN the origin's admin token (required; FLASHGATE_ADMIN_TOKEN if unset)
#   FLASHGATE_DEMO_STARTS_IN=15 seconds from now to the sale's start (shoppers may queue before it)
#   FLASHGATE_DEMO_LASTS=7200   seconds the sale stays open
# Prints the sale id on stdout, progress on stderr; exits 1 when the origin does not take the sale.
set -euo pipefail

log() { printf 'flashgate: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ $# -eq 2 ]] || die "usage: demosale.sh ORIGIN_ADMIN_URL ORIGIN_URL"
origin_admin_url="$1"
origin_url="$2"
admin_token="${FLASHGATE_ORIGIN_ADMIN_TOKEN:-${FLASHGATE_ADMIN_TOKEN:-}}"
[[ -n "$admin_token" ]] || die "demosale.sh needs FLASHGATE_ORIGIN_ADMIN_TOKEN"
starts_in="${FLASHGATE_DEMO_STARTS_IN:-15}"
lasts="${FLASHGATE_DEMO_LASTS:-7200}"

# RFC 3339 UTC, N seconds from now (GNU date, else BSD date).
utc_in() {
	date -u -d "+$1 seconds" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -v "+$1S" +%Y-%m-%dT%H:%M:%SZ
}

sale_id="demo-$(date -u +%Y%m%d-%H%M%S)"
starts_at="$(utc_in "$starts_in")"
ends_at="$(utc_in "$((starts_in + lasts))")"
sale_body="$(
	cat <<EOF
{"sale_id":"$sale_id","name":"Demo sneaker drop","starts_at":"$starts_at","ends_at":"$ends_at","hold_ttl_s":600,"per_account_limit":1,"skus":[{"sku":"sneaker-42","name":"Sneaker size 42","price_minor":499900,"currency":"INR","stock":500},{"sku":"sneaker-43","name":"Sneaker size 43","price_minor":499900,"currency":"INR","stock":500}]}
EOF
)"
resp="$(mktemp)"
trap 'rm -f "$resp"' EXIT
status="$(curl -sS -o "$resp" -w '%{http_code}' --max-time 30 -X POST \
	-H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
	--data "$sale_body" "$origin_admin_url/admin/sales")" || status="000"
case "$status" in
201 | 200) log "created the demo sale $sale_id (starts $starts_at, ends $ends_at)" ;;
*) die "POST $origin_admin_url/admin/sales for the demo sale answered $status: $(cat "$resp" 2>/dev/null)" ;;
esac

# The origin answers for the sale as soon as it is created; say so if it does not.
snapshot="$(curl -sS --max-time 10 "$origin_url/v1/sales/$sale_id" 2>/dev/null || true)"
[[ "$snapshot" == *"\"sale_id\":\"$sale_id\""* ]] || die "GET $origin_url/v1/sales/$sale_id answered: $snapshot"
printf '%s\n' "$sale_id"
