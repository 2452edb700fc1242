package api

import (
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/assets"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The edge's own error codes; httpapi names those both tiers answer with.
const (
	codeUnknownSale   = "unknown_sale"
	codeSaleClosed    = "sale_closed"
	codeSoldOut       = "sold_out"
	codeRateLimited   = "rate_limited"
	codeInvalidToken  = "invalid_token" // as tokens.Code names a token the edge cannot take
	codeInvalidUserID = "invalid_user_id"
	codeInvalidRate   = "invalid_rate"
	// codeInvalidChallengeBits: an admin PUT's proof-of-work difficulty.
	codeInvalidChallengeBits = "invalid_challenge_bits"
	codeInvalidAutotune      = "invalid_autotune"
	codeNotReady             = "not_ready" // GET /readyz while the node is not ready
	codeMissingToken         = "missing_token"
	// codeSuperseded: a queue token from before Redis lost the line, for an
	// account that holds another place since.
	codeSuperseded = "queue_token_superseded"
	// codeAddressNotAllowed: a webhook from outside the gateway's addresses.
	codeAddressNotAllowed = "address_not_allowed"
	codeInvalidAt         = "invalid_at" // a snapshot watch's ?at= that is not a unix second
)

// The edge's answers other than success. Handlers return them, or the
// errors of the services they call, which errorTable maps to them.
var (
	errUnknownSale = httpapi.New(fasthttp.StatusNotFound, codeUnknownSale, "There is no such sale.")
	errSaleClosed  = httpapi.New(fasthttp.StatusConflict, codeSaleClosed, "The sale is over.")
	errSoldOut     = httpapi.New(fasthttp.StatusConflict, codeSoldOut, "Sold out.")
	// errNotReady is please_wait for a sale the edge cannot answer for yet:
	// it is starting, its last snapshot of the sale is older than the bound,
	// or the sale is newer than its last list of the origin's sales.
	errNotReady = &httpapi.Error{
		Status:     fasthttp.StatusServiceUnavailable,
		Code:       httpapi.CodePleaseWait,
		Message:    "The sale's current state is not known here yet; please try again in a moment.",
		RetryAfter: 1,
	}
	// The origin keys a shopper's Redis state by the account id and takes
	// the same alphabet: a join is refused now, not after the wait in line.
	errAccountID = httpapi.New(fasthttp.StatusUnauthorized, codeInvalidToken,
		"The account id in the user token is not one this sale can serve (1 to 128 printable characters without spaces).")
	errUserID = httpapi.New(fasthttp.StatusBadRequest, codeInvalidUserID,
		`The body must be {"user_id": "..."}: 1 to 128 printable characters without spaces.`)
	errAdmissionBody = httpapi.New(fasthttp.StatusBadRequest, httpapi.CodeInvalidJSON,
		`The body must be JSON like {"rate_per_s": 2000, "paused": false, "challenge_bits": 17}.`)
	errRate          = httpapi.New(fasthttp.StatusBadRequest, codeInvalidRate, "rate_per_s must be 0 to 1,000,000.")
	errChallengeBits = httpapi.New(fasthttp.StatusBadRequest, codeInvalidChallengeBits, "challenge_bits must be 0 (none) to 32.")
	errAutotune      = httpapi.New(fasthttp.StatusBadRequest, codeInvalidAutotune,
		"autotune_min_rate_per_s and autotune_max_rate_per_s come together (0 to 1,000,000, min <= max, max > 0), and with autotune: true.")
	errWatchSecond = httpapi.New(fasthttp.StatusBadRequest, codeInvalidAt, "at must be a unix time in whole seconds.")
	errNoFile      = httpapi.New(fasthttp.StatusNotFound, httpapi.CodeNotFound, "There is no such file.")
	// Status polls and reserves carry the shopper's user token besides
	// the queue or admission token.
	errNoUserToken = httpapi.New(fasthttp.StatusUnauthorized, codeMissingToken,
		"This request needs the shopper's user token in X-User-Token as well as the queue or admission token.")
	errWebhookAddress = httpapi.New(fasthttp.StatusForbidden, codeAddressNotAllowed,
		"This address may not send payment webhooks.")
	errSuperseded = httpapi.New(fasthttp.StatusConflict, codeSuperseded,
		"This account holds another place in line since this queue token was issued; poll with the newest queue token, or join again showing this one to learn the place.")
)

// errorTable is the edge's one mapping from an error to its answer, for the
// response and the metrics alike. What it does not know (Redis or an
// upstream failing) answers please_wait and is logged.
var errorTable = httpapi.NewTable(httpapi.PleaseWait).
	Map(assets.ErrNotFound, errNoFile).
	Map(admission.ErrUnknownSale, errUnknownSale).
	Map(admission.ErrNotReady, errNotReady).
	Map(admission.ErrSaleClosed, errSaleClosed).
	Map(admission.ErrSoldOut, errSoldOut).
	// Redis is unreachable, or the line is being restored after Redis lost it.
	Map(admission.ErrCursorStale, httpapi.PleaseWait).
	Map(line.ErrLost, httpapi.PleaseWait).
	// The line stayed at its durable ceiling (the origin is slow or down):
	// never a place from zero.
	Map(line.ErrWait, httpapi.PleaseWait)
