package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/orders"
	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/flashgate/flashgate/origin/internal/sales"
)

// The origin's own error codes (httpapi holds those both tiers answer
// with). Clients branch on them: they are part of the contract.
const (
	codeUnknownSale           = "unknown_sale"
	codeUnknownSKU            = "unknown_sku"
	codeUnknownReservation    = "unknown_reservation"
	codeUnknownOrder          = "unknown_order"
	codeSoldOut               = "sold_out"
	codeLimitReached          = "limit_reached"
	codeHoldLimitReached      = "hold_limit_reached"
	codeSaleNotOpen           = "sale_not_open"
	codeSaleClosed            = "sale_closed"
	codeHoldExpired           = "hold_expired"
	codeInvalidSignature      = "invalid_signature"
	codeStaleSignature        = "stale_signature"
	codeInvalidEvent          = "invalid_event"
	codeInvalidSKU            = "invalid_sku"
	codeInvalidIdempotencyKey = "invalid_idempotency_key"
	codeInvalidReservationID  = "invalid_reservation_id"
	codeInvalidSaleID         = "invalid_sale_id"
	codeInvalidUserID         = "invalid_user_id"
	codeInvalidSeed           = "invalid_seed"
	codeInvalidRate           = "invalid_rate"
	codeInvalidCeiling        = "invalid_ceiling"
	codeInvalidVersion        = "invalid_settings_version"
	codeInvalidChallengeBits  = "invalid_challenge_bits"
	codeInvalidPreQueue       = "invalid_pre_queue"
	codeEmptyChange           = "empty_change"
	codeInvalidActor          = "invalid_actor"
	codeInvalidAutotune       = "invalid_autotune"
	codeNotReady              = "not_ready" // GET /readyz while the origin is starting

	// Admin: sale definitions and rebuilds.
	codeSaleExists             = "sale_exists"
	codeStockMismatch          = "stock_mismatch"
	codeRebuildInProgress      = "rebuild_in_progress"
	codeDrainTimeout           = "drain_timeout"
	codeInvalidName            = "invalid_name"
	codeInvalidWindow          = "invalid_window"
	codeInvalidHoldTTL         = "invalid_hold_ttl"
	codeInvalidPerAccountLimit = "invalid_per_account_limit"
	codeInvalidSKUs            = "invalid_skus"
	codeDuplicateSKU           = "duplicate_sku"
	codeInvalidPrice           = "invalid_price"
	codeInvalidCurrency        = "invalid_currency"
	codeInvalidStock           = "invalid_stock"
)

func badRequest(code, format string, args ...any) *httpapi.Error {
	return httpapi.New(fasthttp.StatusBadRequest, code, fmt.Sprintf(format, args...))
}

// The origin's answers other than success.
var (
	errUnknownSale        = httpapi.New(fasthttp.StatusNotFound, codeUnknownSale, "There is no such sale.")
	errUnknownLine        = httpapi.New(fasthttp.StatusNotFound, codeUnknownSale, "There is no such sale, or its line was never created.")
	errUnknownSKU         = httpapi.New(fasthttp.StatusNotFound, codeUnknownSKU, "This sale has no such SKU.")
	errUnknownReservation = httpapi.New(fasthttp.StatusNotFound, codeUnknownReservation, "There is no such reservation.")
	errUnknownOrder       = httpapi.New(fasthttp.StatusNotFound, codeUnknownOrder, "There is no such order.")
	errSoldOut            = httpapi.New(fasthttp.StatusConflict, codeSoldOut, "Sold out.")
	errLimitReached       = httpapi.New(fasthttp.StatusForbidden, codeLimitReached, "This account has already bought its limit in this sale.")
	errHoldLimitReached   = httpapi.New(fasthttp.StatusForbidden, codeHoldLimitReached, "This account has held a unit in this sale as many times as it may.")
	errSaleNotOpen        = httpapi.New(fasthttp.StatusConflict, codeSaleNotOpen, "The sale has not started yet.")
	errSaleClosed         = httpapi.New(fasthttp.StatusConflict, codeSaleClosed, "The sale is over.")
	errHoldExpired        = httpapi.New(fasthttp.StatusConflict, codeHoldExpired, "The hold on this unit has ended; it can no longer be paid for.")
	errNoPayments         = &httpapi.Error{Status: fasthttp.StatusServiceUnavailable, Code: httpapi.CodePleaseWait,
		Message: "Payments are not available right now; please try again in a moment.", RetryAfter: 5}
	// errStarting is please_wait while the origin waits for Redis and
	// Postgres at start-up (Deps.Ready).
	errStarting = &httpapi.Error{Status: fasthttp.StatusServiceUnavailable, Code: httpapi.CodePleaseWait,
		Message: "The checkout is starting; please try again in a moment.", RetryAfter: 1}
	errInvalidSignature = httpapi.New(fasthttp.StatusUnauthorized, codeInvalidSignature, "The Payment-Signature does not verify.")
	errStaleSignature   = httpapi.New(fasthttp.StatusUnauthorized, codeStaleSignature, "The Payment-Signature's time is outside the tolerance.")
	errInvalidEvent     = httpapi.New(fasthttp.StatusBadRequest, codeInvalidEvent, "The body is not a payment event.")
	errMethodNotAllowed = httpapi.New(fasthttp.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "This path does not take that method.")

	errInvalidSKU            = badRequest(codeInvalidSKU, "sku must be 1 to 64 letters, digits, '_' or '-'.")
	errInvalidIdempotencyKey = badRequest(codeInvalidIdempotencyKey, "idempotency_key must be 1 to 128 printable characters without spaces.")
	errInvalidReservationID  = badRequest(codeInvalidReservationID, "reservation_id must be a reservation id as the reserve answer gave it.")
	errInvalidSaleID         = badRequest(codeInvalidSaleID, "sale_id must be 1 to 64 letters, digits, '_' or '-'.")
	errInvalidUserID         = badRequest(codeInvalidUserID, "user_id must be 1 to 128 printable characters without spaces.")
	errInvalidSeed           = badRequest(codeInvalidSeed, "seed must be 64 lower-case hex characters (32 bytes).")
	errInvalidRate           = badRequest(codeInvalidRate, "rate_per_s must be 0 to 1,000,000.")
	errInvalidCeiling        = badRequest(codeInvalidCeiling, "pre, post and serving must be 0 to %d.", int64(maxCeiling))
	errInvalidPreQueue       = badRequest(codeInvalidPreQueue, "pre_queue must be 0 to %d.", int64(maxCeiling))
	errInvalidVersion        = badRequest(codeInvalidVersion, "settings_version must be given with a serving ceiling, 0 or more.")
	errInvalidChallengeBits  = badRequest(codeInvalidChallengeBits, "challenge_bits must be 0 to %d.", maxChallengeBits)
	errNoSettings            = badRequest(codeEmptyChange, "Give rate_per_s, paused, challenge_bits or several.")
	errInvalidActor          = badRequest(codeInvalidActor, "actor must be up to 200 bytes of printable text.")
	errInvalidAutotune       = badRequest(codeInvalidAutotune,
		"autotune_min_rate_per_s and autotune_max_rate_per_s come together (0 to 1,000,000, min <= max, max > 0), and with autotune: true.")
	errNoCeilings = badRequest(codeEmptyChange, "Give pre, post, serving or several.")

	errSaleExists     = httpapi.New(fasthttp.StatusConflict, codeSaleExists, "A different sale with this sale_id exists.")
	errStockMismatch  = httpapi.New(fasthttp.StatusConflict, codeStockMismatch, "Redis already holds other stock figures for this sale; rebuild it from Postgres.")
	errRebuildRunning = httpapi.New(fasthttp.StatusConflict, codeRebuildInProgress, "A rebuild of this sale is already running.")
	errDrainTimeout   = httpapi.New(fasthttp.StatusConflict, codeDrainTimeout,
		"Pending intents did not drain in time (is the order writer running and Postgres up?); nothing was rebuilt.")
)

// errorTable is the one place the origin's handlers' errors become answers:
// an *httpapi.Error as it is, a token failure 401, the services' sentinels
// below, and anything else (Redis or Postgres down, a timeout) 503
// please_wait, logged. The answer and the metrics both come from it.
var errorTable = httpapi.NewTable(httpapi.PleaseWait).
	Map(catalog.ErrUnknownSale, errUnknownSale).
	Map(ledger.ErrUnknownLine, errUnknownLine).
	Map(ledger.ErrSaleExists, errSaleExists).
	Map(checkout.ErrStockMismatch, errStockMismatch).
	Map(sales.ErrUnknownReservation, errUnknownReservation).
	Map(sales.ErrSaleNotOpen, errSaleNotOpen).
	Map(sales.ErrSaleClosed, errSaleClosed).
	Map(sales.ErrUnknownSKU, errUnknownSKU).
	Map(sales.ErrSoldOut, errSoldOut).
	Map(sales.ErrLimitReached, errLimitReached).
	Map(sales.ErrHoldLimitReached, errHoldLimitReached).
	Map(sales.ErrRebuildRunning, errRebuildRunning).
	Map(sales.ErrDrainTimeout, errDrainTimeout).
	Map(orders.ErrUnknownOrder, errUnknownOrder).
	Map(orders.ErrHoldExpired, errHoldExpired).
	Map(payment.ErrBadSignature, errInvalidSignature).
	Map(payment.ErrStaleSignature, errStaleSignature).
	Map(payment.ErrBadEvent, errInvalidEvent).
	// Expected and passing: the same call succeeds shortly.
	Map(sales.ErrRestoring, httpapi.PleaseWait).
	Map(checkout.ErrRebuildInProgress, httpapi.PleaseWait).
	Map(checkout.ErrNotDurable, httpapi.PleaseWait).
	Map(checkout.ErrReserverClosed, httpapi.PleaseWait)

// fail answers err as errorTable classifies it, counts the answer's code,
// and logs an error no rule expected (a dependency failed) with the
// request id the answer carries.
func (s *Server) fail(ctx *fasthttp.RequestCtx, err error) {
	answer, expected := errorTable.Classify(err)
	if !expected && !errors.Is(err, context.Canceled) {
		s.Log.Warn("request failed", "request_id", httpapi.RequestID(ctx),
			"method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
	}
	s.errors.WithLabelValues(answer.Code).Inc()
	httpapi.WriteError(ctx, answer)
}

// writeJSON answers success: v as the JSON body with status.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) { httpapi.WriteJSON(ctx, status, v) }
