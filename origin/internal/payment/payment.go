// Package payment is the payment gateway as the origin sees it: the records
// it keeps (intents, refunds, events), an HTTP client for its API, and the
// check of its signed webhooks. The gateway is UPI-style: the origin creates
// a payment intent, the shopper pays on the gateway's own page, and the
// gateway reports the outcome by webhook, retrying and sometimes twice.
package payment

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Intent statuses.
const (
	IntentRequiresPayment = "requires_payment"
	IntentSucceeded       = "succeeded"
	IntentFailed          = "failed"
)

// Refund statuses, as every provider's are mapped onto them.
const (
	// RefundPending: the gateway has the refund and the money is on its
	// way (a bank's refund can take days).
	RefundPending = "pending"
	// RefundSucceeded: the money is back.
	RefundSucceeded = "succeeded"
	// RefundFailed: the refund will not give the money back (it failed,
	// or was cancelled); another may be made.
	RefundFailed = "failed"
)

// Event types the origin acts on.
const (
	EventPaymentSucceeded = "payment_intent.succeeded"
	EventPaymentFailed    = "payment_intent.failed"
	EventRefundSucceeded  = "refund.succeeded"
	EventRefundFailed     = "refund.failed"
)

// Intent is a payment the gateway expects or has taken.
type Intent struct {
	ID          string            `json:"intent_id"`
	Status      string            `json:"status"`
	AmountMinor int64             `json:"amount_minor"`
	Currency    string            `json:"currency"`
	Metadata    map[string]string `json:"metadata"`
	PayURL      string            `json:"pay_url"`
	ReturnURL   string            `json:"return_url"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	// Refunds are all the intent's refunds, failed ones included, oldest
	// first.
	Refunds []Refund `json:"refunds"`
	// Payer is the instrument that paid (a UPI VPA such as
	// "upi:alice@okbank", a card fingerprint), once the intent succeeded;
	// "" when the gateway reports none. Opaque: compared as it is.
	Payer string `json:"payer"`
}

// OrderID is the order the intent was created for (its metadata).
func (in Intent) OrderID() string { return in.Metadata["order_id"] }

// Refunded is the sum of the intent's refunds that give money back or
// will (all but failed ones).
func (in Intent) Refunded() int64 {
	var n int64
	for _, r := range in.Refunds {
		if r.Status != RefundFailed {
			n += r.AmountMinor
		}
	}
	return n
}

// RefundByID is the intent's refund id, if it has one by that id.
func (in Intent) RefundByID(id string) (Refund, bool) {
	for _, r := range in.Refunds {
		if r.ID == id {
			return r, true
		}
	}
	return Refund{}, false
}

// Refund is money given back on a succeeded intent.
type Refund struct {
	ID          string    `json:"refund_id"`
	IntentID    string    `json:"intent_id"`
	AmountMinor int64     `json:"amount_minor"`
	Status      string    `json:"status"` // RefundPending, RefundSucceeded or RefundFailed
	CreatedAt   time.Time `json:"created_at"`
}

// NewIntent is what the origin asks the gateway to collect.
type NewIntent struct {
	AmountMinor int64             `json:"amount_minor"`
	Currency    string            `json:"currency"`
	Metadata    map[string]string `json:"metadata"`
	ReturnURL   string            `json:"return_url,omitempty"`
	// ExpiresAt is when the order's hold ends, its grace included: a
	// provider whose hosted page can expire makes it expire then, or as
	// soon after as the provider allows (a payment after the hold is
	// refunded by the late-payment path). Not part of the sandbox's API.
	ExpiresAt time.Time `json:"-"`
}

// Event is one webhook delivery's body.
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"created_at"`
	Data      struct {
		Intent Intent  `json:"intent"`
		Refund *Refund `json:"refund,omitempty"`
	} `json:"data"`
}

// ErrBadEvent: a webhook body that is not an event.
var ErrBadEvent = errors.New("payment: malformed event")

// ParseEvent reads a webhook body. Unknown fields are allowed (gateways add
// fields); an id and a type are required (what else an event needs depends
// on its type).
func ParseEvent(body []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if e.ID == "" || e.Type == "" {
		return Event{}, fmt.Errorf("%w: id and type are required", ErrBadEvent)
	}
	if len(e.ID) > 128 {
		return Event{}, fmt.Errorf("%w: id longer than 128 bytes", ErrBadEvent)
	}
	return e, nil
}
