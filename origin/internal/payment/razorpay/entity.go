package razorpay

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Razorpay's entities, as far as this adapter reads them. Each field is in
// the entity's documentation (testdata/README.md names the pages); fields
// that Razorpay sends as null decode to their zero value.

// link is a Payment Link entity.
type link struct {
	ID          string        `json:"id"`
	Amount      int64         `json:"amount"`
	AmountPaid  int64         `json:"amount_paid"`
	Currency    string        `json:"currency"`
	Status      string        `json:"status"`
	ReferenceID string        `json:"reference_id"`
	ShortURL    string        `json:"short_url"`
	CallbackURL string        `json:"callback_url"`
	Notes       notes         `json:"notes"`
	Payments    []linkPayment `json:"payments"`
	ExpireBy    int64         `json:"expire_by"`
	CreatedAt   int64         `json:"created_at"`
	UpdatedAt   int64         `json:"updated_at"`
}

// linkPayment is an entry of a link's payments: only captured payments are
// listed there.
type linkPayment struct {
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Method    string `json:"method"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"`
}

// linkList is the answer of GET /v1/payment_links.
type linkList struct {
	PaymentLinks []link `json:"payment_links"`
}

// Payment Link statuses.
const (
	linkCreated       = "created"
	linkPartiallyPaid = "partially_paid"
	linkPaid          = "paid"
	linkExpired       = "expired"
	linkCancelled     = "cancelled"
)

// paymentEntity is a Payment entity.
type paymentEntity struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	Method         string `json:"method"`
	OrderID        string `json:"order_id"`
	AmountRefunded int64  `json:"amount_refunded"`
	RefundStatus   string `json:"refund_status"`
	Captured       bool   `json:"captured"`
	VPA            string `json:"vpa"`
	UPI            *struct {
		VPA string `json:"vpa"`
	} `json:"upi"`
	Notes     notes `json:"notes"`
	CreatedAt int64 `json:"created_at"`
}

// Payment statuses that mean money was taken.
const (
	paymentCaptured = "captured"
	paymentRefunded = "refunded"
)

// refundEntity is a Refund entity.
type refundEntity struct {
	ID        string `json:"id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	PaymentID string `json:"payment_id"`
	Receipt   string `json:"receipt"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"`
}

// Refund statuses: pending until processed (final) or failed.
const (
	refundPending   = "pending"
	refundProcessed = "processed"
	refundFailed    = "failed"
)

// collection is a page of a listing (payments, refunds).
type collection[T any] struct {
	Entity string `json:"entity"`
	Count  int    `json:"count"`
	Items  []T    `json:"items"`
}

// notes is an entity's notes: an object of strings, which Razorpay also
// sends as [] when empty and null when unset (both appear in its
// documented examples). A value that is not a string keeps its JSON text.
type notes map[string]string

func (n *notes) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*n = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var arr []json.RawMessage
		if err := json.Unmarshal(b, &arr); err != nil {
			return err
		}
		if len(arr) > 0 {
			return errors.New("notes: a non-empty array")
		}
		*n = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m := make(notes, len(raw))
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			m[k] = s
		} else {
			m[k] = string(v)
		}
	}
	*n = m
	return nil
}

// unix reads a Razorpay timestamp (Unix seconds; 0 means none).
func unix(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// intentStatus maps a link's status: paid succeeded; expired and cancelled
// failed; created and partially_paid (and anything new) still await
// payment.
func intentStatus(s string) string {
	switch s {
	case linkPaid:
		return payment.IntentSucceeded
	case linkExpired, linkCancelled:
		return payment.IntentFailed
	}
	return payment.IntentRequiresPayment
}

// intent maps a link; its payer and refunds are the caller's to add.
func (l link) intent() payment.Intent {
	in := payment.Intent{
		ID:          l.ID,
		Status:      intentStatus(l.Status),
		AmountMinor: l.Amount,
		Currency:    l.Currency,
		PayURL:      l.ShortURL,
		ReturnURL:   l.CallbackURL,
		CreatedAt:   unix(l.CreatedAt),
		UpdatedAt:   unix(l.UpdatedAt),
	}
	if len(l.Notes) > 0 {
		in.Metadata = make(map[string]string, len(l.Notes))
		for k, v := range l.Notes {
			in.Metadata[k] = v
		}
	}
	if l.Status == linkPaid && l.AmountPaid > 0 {
		in.AmountMinor = l.AmountPaid
	}
	return in
}

// payer is the instrument a payment came from: "upi:<vpa>" for UPI (the
// payment's vpa, or upi.vpa); "" otherwise, and when Razorpay reports no
// VPA (it documents that a failed UPI intent payment may lack one). A
// card's card_id is not documented as stable across payments, and card
// fingerprints are an on-demand API keyed by the card number or a token,
// so cards have no payer here.
func (pe paymentEntity) payer() string {
	if pe.Method != "upi" {
		return ""
	}
	vpa := pe.VPA
	if vpa == "" && pe.UPI != nil {
		vpa = pe.UPI.VPA
	}
	if vpa == "" {
		return ""
	}
	// A VPA names one account whatever its case (Alice@okbank is
	// alice@okbank): one payer, for the one-unit-per-payer rule.
	return "upi:" + strings.ToLower(vpa)
}

// refund maps a refund of the link linkID: processed is succeeded, failed
// failed, and pending (or any status Razorpay adds) still on its way.
func (r refundEntity) refund(linkID string) payment.Refund {
	status := payment.RefundPending
	switch r.Status {
	case refundProcessed:
		status = payment.RefundSucceeded
	case refundFailed:
		status = payment.RefundFailed
	}
	return payment.Refund{
		ID:          r.ID,
		IntentID:    linkID,
		AmountMinor: r.Amount,
		Status:      status,
		CreatedAt:   unix(r.CreatedAt),
	}
}

// refunds maps a payment's refunds, oldest first (the order of Razorpay's
// listing is not documented).
func refunds(linkID string, rs []refundEntity) []payment.Refund {
	out := make([]payment.Refund, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.refund(linkID))
	}
	slices.SortStableFunc(out, func(a, b payment.Refund) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
