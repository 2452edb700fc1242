package sandboxgateway

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"
)

// Status is the state of an intent: it starts requiring payment and ends
// succeeded or failed, never changing again. Refunds leave it succeeded.
type Status string

// The statuses of an intent.
const (
	StatusRequiresPayment Status = "requires_payment"
	StatusSucceeded       Status = "succeeded"
	StatusFailed          Status = "failed"
)

// Intent is one payment the merchant asked for, as the API answers it.
type Intent struct {
	ID          string            `json:"intent_id"` // "pi_" + 24 hex digits
	Status      Status            `json:"status"`
	AmountMinor int64             `json:"amount_minor"`
	Currency    string            `json:"currency"`
	Metadata    map[string]string `json:"metadata"`   // never nil
	PayURL      string            `json:"pay_url"`    // the hosted page, "#key=" + its pay key after the path
	ReturnURL   string            `json:"return_url"` // "" when not given
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	Refunds     []Refund          `json:"refunds"` // in creation order; never nil
	// Payer is the instrument that paid, as a real gateway reports it (a
	// UPI VPA such as "upi:alice@okbank", a card fingerprint); absent until
	// the intent succeeds.
	Payer string `json:"payer,omitempty"`

	// The fields below are the personalities' (see Config.Personality);
	// the flashgate protocol does not show them.

	// ExpiresAt is when the provider's page would stop taking the payment,
	// as the personality reports it; zero: not said. The core never
	// expires an intent by itself.
	ExpiresAt time.Time `json:"-"`
	// SettledAt is when the intent succeeded or failed; zero while it
	// requires payment.
	SettledAt time.Time `json:"-"`
	// Closed is set on a failed intent that the merchant ended through
	// its personality's API (Stripe's expire, Razorpay's cancel) rather
	// than the payer or the /fail control endpoint: Razorpay reports the
	// one as cancelled and the other as expired.
	Closed bool `json:"-"`
	// Params are the personality's own parameters of the request that
	// made the intent, verbatim, form-encoded with sorted keys (Stripe's
	// form fields, say): the core compares them for idempotency and never
	// reads them. "": none.
	Params string `json:"-"`
}

// PayKey is the pay key pay_url carries after "#key=", out of every server
// log; false when it carries none.
func (in Intent) PayKey() (string, bool) {
	u, err := url.Parse(in.PayURL)
	if err != nil {
		return "", false
	}
	q, err := url.ParseQuery(u.Fragment)
	if err != nil || q.Get("key") == "" {
		return "", false
	}
	return q.Get("key"), true
}

// Refund gives back part or all of a succeeded intent's amount. A refund
// succeeds at once, or, while refunds are held (HoldRefunds), stays
// pending until ProcessRefund or FailRefund settles it. A failed refund
// gives nothing back: what it asked for may be refunded again.
type Refund struct {
	ID          string    `json:"refund_id"` // "re_" + 24 hex digits
	IntentID    string    `json:"intent_id"`
	AmountMinor int64     `json:"amount_minor"`
	Status      string    `json:"status"` // RefundPending, RefundSucceeded or RefundFailed
	CreatedAt   time.Time `json:"created_at"`
	// Params are the personality's own parameters of the request that
	// made the refund, as Intent.Params.
	Params string `json:"-"`
}

// The statuses of a refund: pending (only while refunds are held) until
// settled, succeeded or failed, never changing again.
const (
	RefundPending   = "pending"
	RefundSucceeded = "succeeded"
	RefundFailed    = "failed"
)

// Errors of the Go methods; the API answers them with the codes noted.
var (
	ErrUnknownIntent    = errors.New("unknown intent")                            // 404 unknown_intent
	ErrIntentFailed     = errors.New("intent failed, it cannot be paid")          // 409 intent_failed
	ErrIntentSucceeded  = errors.New("intent succeeded, it cannot fail")          // 409 intent_succeeded
	ErrUnknownRefund    = errors.New("unknown refund")                            // 404 unknown_refund
	ErrRefundNotPending = errors.New("refund is not pending, it was settled")     // 409 refund_not_pending
	errNotSucceeded     = errors.New("intent has not succeeded")                  // 409 intent_not_succeeded
	errRefundExceeds    = errors.New("refunds would exceed the amount")           // 409 refund_exceeds_amount
	errIdempotencyUsed  = errors.New("idempotency key used with another request") // 409 idempotency_conflict
)

// Limits on what a merchant may store on an intent.
const (
	maxMetadataKeys  = 50
	maxMetadataKey   = 40  // bytes
	maxMetadataValue = 500 // bytes
	maxReturnURL     = 2048
)

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// createRequest is the body of POST /v1/intents.
type createRequest struct {
	AmountMinor int64             `json:"amount_minor"`
	Currency    string            `json:"currency"`
	Metadata    map[string]string `json:"metadata"`
	ReturnURL   string            `json:"return_url"`
	// ExpiresAt and Params are set by personalities: see Intent.
	ExpiresAt time.Time `json:"-"`
	Params    string    `json:"-"`
}

// validate returns a message for the first invalid field, or "".
func (r createRequest) validate() string {
	switch {
	case r.AmountMinor <= 0:
		return "amount_minor must be a positive integer in minor units"
	case !currencyRE.MatchString(r.Currency):
		return "currency must be three capital letters, like INR"
	case len(r.Metadata) > maxMetadataKeys:
		return fmt.Sprintf("metadata may hold at most %d keys", maxMetadataKeys)
	case len(r.ReturnURL) > maxReturnURL:
		return fmt.Sprintf("return_url may be at most %d bytes", maxReturnURL)
	}
	for k, v := range r.Metadata {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Sprintf("metadata keys must be 1 to %d bytes and values at most %d bytes of UTF-8", maxMetadataKey, maxMetadataValue)
		}
	}
	if r.ReturnURL != "" {
		if u, err := url.Parse(r.ReturnURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "return_url must be an absolute http or https URL"
		}
	}
	return ""
}

// same reports whether r and o ask for the same intent; a missing and an
// empty metadata are the same. ExpiresAt is not compared: a personality
// derives it from its Params (or from the time of the first request).
func (r createRequest) same(o createRequest) bool {
	return r.AmountMinor == o.AmountMinor && r.Currency == o.Currency &&
		r.ReturnURL == o.ReturnURL && maps.Equal(r.Metadata, o.Metadata) &&
		r.Params == o.Params
}

// createRecord remembers what an intent-creation idempotency key did.
type createRecord struct {
	req      createRequest
	intentID string
}

// refundRecord remembers what a refund idempotency key did. Refund keys are
// a namespace of their own, apart from intent-creation keys.
type refundRecord struct {
	intentID  string
	requested *int64 // the amount_minor asked for; nil: the rest
	params    string
	refundID  string // the refund it made, replayed as it is now
}

// createIntent creates the intent req asks for, or, when key was already
// used for the same request, returns that intent as it is now with
// created false.
func (g *Gateway) createIntent(key string, req createRequest) (in Intent, created bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rec, ok := g.createKeys[key]; ok {
		if !rec.req.same(req) {
			return Intent{}, false, errIdempotencyUsed
		}
		return g.intents[rec.intentID].clone(), false, nil
	}
	now := g.now()
	id := newID(g.persona.intentPrefix())
	payKey := newPayKey()
	p := &Intent{
		ID:          id,
		Status:      StatusRequiresPayment,
		AmountMinor: req.AmountMinor,
		Currency:    req.Currency,
		Metadata:    maps.Clone(req.Metadata),
		PayURL:      g.publicURL + "/pay/" + id + "#" + payKeyParam + "=" + payKey,
		ReturnURL:   req.ReturnURL,
		CreatedAt:   now,
		UpdatedAt:   now,
		ExpiresAt:   req.ExpiresAt,
		Params:      req.Params,
	}
	if p.Metadata == nil {
		p.Metadata = map[string]string{}
	}
	req.Metadata = maps.Clone(req.Metadata)
	g.intents[id] = p
	g.payKeys[id] = payKey
	g.order = append(g.order, p)
	g.createKeys[key] = createRecord{req: req, intentID: id}
	g.log.Info("intent created", "intent_id", id, "amount_minor", p.AmountMinor, "currency", p.Currency,
		"order_id", p.Metadata["order_id"])
	return p.clone(), true, nil
}

// coreRefundPrefix starts every refund id, before 24 random hex digits.
const coreRefundPrefix = "re_"

// payKeyParam names the pay key in pay_url's fragment. A fragment is
// never sent to a server, so the key stays out of access logs and Referer
// headers; the page's script reads it from location.hash.
const payKeyParam = "key"

// newPayKey returns an intent's pay key: "pk_" and 128 random bits in hex.
func newPayKey() string { return "pk_" + randomHex(16) }

// payKeyMatches reports, in time independent of key, whether key is the
// pay key of intent id; false for an unknown intent.
func (g *Gateway) payKeyMatches(id string, key []byte) bool {
	g.mu.Lock()
	want, ok := g.payKeys[id]
	g.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(key, []byte(want)) == 1
}

// Intent returns the intent with that id, or ErrUnknownIntent.
func (g *Gateway) Intent(id string) (Intent, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.intents[id]
	if !ok {
		return Intent{}, ErrUnknownIntent
	}
	return p.clone(), nil
}

// Intents returns every intent in creation order.
func (g *Gateway) Intents() []Intent { return g.intentsSince(time.Time{}) }

// intentsSince returns, in creation order, the intents created at or after
// since.
func (g *Gateway) intentsSince(since time.Time) []Intent {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []Intent{}
	for _, p := range g.order {
		if !p.CreatedAt.Before(since) {
			out = append(out, p.clone())
		}
	}
	return out
}

// Pay marks a requires_payment intent succeeded, paid by a payer of its
// own (DefaultPayer), and sends payment_intent.succeeded. Paying a
// succeeded intent again changes nothing and sends nothing; a failed
// intent gives ErrIntentFailed.
func (g *Gateway) Pay(id string) (Intent, error) { return g.PayAs(id, "") }

// PayAs is Pay by the instrument payer, which must satisfy ValidPayer; ""
// means DefaultPayer(id). A repeat keeps the first payer.
func (g *Gateway) PayAs(id, payer string) (Intent, error) {
	if payer == "" {
		payer = DefaultPayer(id)
	}
	return g.settle(id, StatusSucceeded, payer, onThePage)
}

// Fail marks a requires_payment intent failed and sends
// payment_intent.failed. Failing a failed intent again changes nothing and
// sends nothing; a succeeded intent gives ErrIntentSucceeded.
func (g *Gateway) Fail(id string) (Intent, error) { return g.settle(id, StatusFailed, "", onThePage) }

// expire is Fail for an intent that still requires payment only: a failed
// one gives ErrIntentFailed, as a provider that expires only open
// payments answers.
func (g *Gateway) expire(id string) (Intent, error) {
	return g.settle(id, StatusFailed, "", closedByMerchant)
}

// ending is who ends an intent's payment.
type ending int

const (
	// onThePage: the shopper paid or failed (or the sandbox said so). A
	// repeat of the same end changes nothing and is no error.
	onThePage ending = iota
	// closedByMerchant: the merchant closed the page (Stripe's expire,
	// Razorpay's cancel), which only an open intent takes; the intent
	// reads Closed.
	closedByMerchant
)

// DefaultPayer is the payer of an intent paid without one: unique to the
// intent, so callers that name no payer (scripts, the crowd simulator)
// never look like one shopper paying twice.
func DefaultPayer(intentID string) string { return "upi:payer-" + intentID + "@sandbox" }

// maxPayerLen bounds a payer, in bytes.
const maxPayerLen = 100

// ValidPayer reports whether payer may name an instrument: 1 to
// maxPayerLen bytes of printable UTF-8 without spaces.
func ValidPayer(payer string) bool {
	if payer == "" || len(payer) > maxPayerLen || !utf8.ValidString(payer) {
		return false
	}
	for _, r := range payer {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// settle moves intent id to its final status to, paid by payer when to is
// StatusSucceeded, as by ends it. An intent already settled gives
// ErrIntentFailed or ErrIntentSucceeded, its status — except a repeat of
// the same end on the page, which changes nothing.
func (g *Gateway) settle(id string, to Status, payer string, by ending) (Intent, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.intents[id]
	if !ok {
		return Intent{}, ErrUnknownIntent
	}
	switch {
	case p.Status == to && by == onThePage:
		return p.clone(), nil
	case p.Status == StatusFailed:
		return Intent{}, ErrIntentFailed
	case p.Status == StatusSucceeded:
		return Intent{}, ErrIntentSucceeded
	}
	p.Status = to
	if to == StatusSucceeded {
		p.Payer = payer
	}
	p.Closed = by == closedByMerchant
	p.UpdatedAt = g.now()
	p.SettledAt = p.UpdatedAt
	in := p.clone()
	typ := EventPaymentSucceeded
	if to == StatusFailed {
		typ = EventPaymentFailed
	}
	g.log.Info("intent "+string(to), "intent_id", id, "order_id", p.Metadata["order_id"])
	g.publishLocked(coreEvent{Kind: typ, At: in.UpdatedAt, Intent: in})
	return in, nil
}

// refund refunds amount (nil: whatever is left unrefunded) of a succeeded
// intent, or, when key was already used for the same request (same
// intent, amount and params), returns that refund as it is now with
// created false. Failed refunds leave their amount unrefunded. The refund
// succeeds at once and sends refund.succeeded, or, while refunds are
// held, is pending and sends refund.created. params are the
// personality's, kept on the refund.
func (g *Gateway) refund(intentID, key string, amount *int64, params string) (re Refund, created bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.intents[intentID]
	if !ok {
		return Refund{}, false, ErrUnknownIntent
	}
	if rec, ok := g.refundKeys[key]; ok {
		if rec.intentID != intentID || !sameAmount(rec.requested, amount) || rec.params != params {
			return Refund{}, false, errIdempotencyUsed
		}
		i := slices.IndexFunc(p.Refunds, func(r Refund) bool { return r.ID == rec.refundID })
		return p.Refunds[i], false, nil
	}
	if p.Status != StatusSucceeded {
		return Refund{}, false, errNotSucceeded
	}
	left := p.AmountMinor - refunded(p.Refunds)
	n := left
	if amount != nil {
		n = *amount
	}
	if n <= 0 || n > left {
		return Refund{}, false, errRefundExceeds
	}
	now := g.now()
	status, kind := RefundSucceeded, EventRefundSucceeded
	if g.holdRefunds {
		status, kind = RefundPending, EventRefundCreated
	}
	re = Refund{ID: newID(coreRefundPrefix), IntentID: intentID, AmountMinor: n, Status: status, CreatedAt: now,
		Params: params}
	p.Refunds = append(p.Refunds, re)
	p.UpdatedAt = now
	var requested *int64
	if amount != nil {
		requested = new(*amount)
	}
	g.refundKeys[key] = refundRecord{intentID: intentID, requested: requested, params: params, refundID: re.ID}
	g.refundIntents[re.ID] = intentID
	g.log.Info("refund "+status, "intent_id", intentID, "refund_id", re.ID, "amount_minor", n,
		"left_minor", left-n)
	g.publishLocked(coreEvent{Kind: kind, At: now, Intent: p.clone(), Refund: &re})
	return re, true, nil
}

// refunded is the amount refunds give back: all but the failed ones,
// pending ones included, as a provider counts them against what is left
// to refund.
func refunded(refunds []Refund) int64 {
	var n int64
	for _, r := range refunds {
		if r.Status != RefundFailed {
			n += r.AmountMinor
		}
	}
	return n
}

// HoldRefunds switches holding refunds on or off. While on, a new refund
// is pending, as a provider's refund is for days, until ProcessRefund or
// FailRefund settles it; while off (the default) it succeeds at once.
// Switching off settles nothing already pending.
func (g *Gateway) HoldRefunds(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdRefunds = on
}

// RefundsHeld reports whether refunds are held (see HoldRefunds).
func (g *Gateway) RefundsHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holdRefunds
}

// ProcessRefund settles pending refund id as succeeded and sends
// refund.succeeded. id is the refund's id as the core or the personality
// shows it (Razorpay's rfnd_…, say). An unknown refund gives
// ErrUnknownRefund, one already settled ErrRefundNotPending.
func (g *Gateway) ProcessRefund(id string) error {
	_, err := g.settleRefund(id, RefundSucceeded)
	return err
}

// FailRefund settles pending refund id as failed and sends refund.failed:
// its amount is unrefunded again, for a new refund (another idempotency
// key) to give back. id and the errors are as for ProcessRefund.
func (g *Gateway) FailRefund(id string) error {
	_, err := g.settleRefund(id, RefundFailed)
	return err
}

// settleRefund moves pending refund id to status to, RefundSucceeded or
// RefundFailed, and sends its event.
func (g *Gateway) settleRefund(id, to string) (Refund, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id = g.persona.coreRefundID(id)
	p, ok := g.intents[g.refundIntents[id]]
	if !ok {
		return Refund{}, ErrUnknownRefund
	}
	i := slices.IndexFunc(p.Refunds, func(r Refund) bool { return r.ID == id })
	re := &p.Refunds[i]
	if re.Status != RefundPending {
		return Refund{}, ErrRefundNotPending
	}
	re.Status = to
	now := g.now()
	p.UpdatedAt = now
	kind := EventRefundSucceeded
	if to == RefundFailed {
		kind = EventRefundFailed
	}
	out := *re
	g.log.Info("refund "+to, "intent_id", p.ID, "refund_id", id, "amount_minor", out.AmountMinor,
		"left_minor", p.AmountMinor-refunded(p.Refunds))
	g.publishLocked(coreEvent{Kind: kind, At: now, Intent: p.clone(), Refund: &out, From: RefundPending})
	return out, nil
}

// sameAmount reports whether two optional amounts are equal.
func sameAmount(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// clone returns a deep copy of p.
func (p *Intent) clone() Intent {
	c := *p
	c.Metadata = maps.Clone(p.Metadata)
	c.Refunds = slices.Clone(p.Refunds)
	if c.Refunds == nil {
		c.Refunds = []Refund{}
	}
	return c
}
