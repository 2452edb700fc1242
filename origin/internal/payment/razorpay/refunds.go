package razorpay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// newRefund is the body of POST /v1/payments/{id}/refund.
type newRefund struct {
	Amount  int64  `json:"amount"`
	Speed   string `json:"speed"`
	Receipt string `json:"receipt"`
}

// pageSize is the most a listing page holds (count's documented maximum).
const pageSize = 100

// maxPages bounds a listing: past it the call fails loudly (the reconciler
// then alerts) rather than paging without end.
const maxPages = 500

// Refund gives amountMinor (0: all that is left) of the payment on link
// linkID back, at normal speed. The same idempotencyKey always gets the
// same refund back: it is the refund's receipt, looked up among the
// payment's refunds first, and its X-Refund-Idempotency header. The
// refund's Status is payment.RefundSucceeded only once Razorpay has
// processed it, payment.RefundPending until then (normal refunds take
// days), payment.RefundFailed if it failed.
func (p *Provider) Refund(ctx context.Context, linkID string, amountMinor int64, idempotencyKey string) (payment.Refund, error) {
	start := time.Now()
	r, err := p.refund(ctx, linkID, amountMinor, idempotencyKey)
	p.observe(callRefund, start, err)
	return r, err
}

func (p *Provider) refund(ctx context.Context, linkID string, amountMinor int64, idempotencyKey string) (payment.Refund, error) {
	if amountMinor < 0 {
		return payment.Refund{}, fmt.Errorf("refund of payment link %s: amount %d is negative", linkID, amountMinor)
	}
	l, err := p.link(ctx, linkID)
	if err != nil {
		return payment.Refund{}, fmt.Errorf("refund of payment link %s: %w", linkID, err)
	}
	// A link's payments are its captured payments; a link never takes
	// partial payments here, so a paid link has one.
	switch len(l.Payments) {
	case 0:
		// Not a refusal: a payment just captured may not be listed yet.
		return payment.Refund{}, fmt.Errorf("refund of payment link %s (%s): no captured payment", linkID, l.Status)
	case 1:
	default:
		return payment.Refund{}, fmt.Errorf("refund of payment link %s: %d captured payments", linkID, len(l.Payments))
	}
	paid := l.Payments[0]
	receipt := refundKey(idempotencyKey)
	made, err := p.paymentRefunds(ctx, paid.PaymentID)
	if err != nil {
		return payment.Refund{}, fmt.Errorf("refund of payment link %s: %w", linkID, err)
	}
	left := paid.Amount
	for _, r := range made {
		if r.Receipt == receipt {
			// As it is now: a failed one stays failed for this key, and
			// the order flow makes the next under another.
			return r.refund(linkID), nil
		}
		if r.Status != refundFailed {
			left -= r.Amount
		}
	}
	amount := amountMinor
	if amount == 0 {
		amount = left
	}
	if amount <= 0 {
		// What Razorpay answers "The payment has been fully refunded
		// already" to; not asked, since an amount of 0 is refused too.
		return payment.Refund{}, fmt.Errorf("refund of payment link %s: %w", linkID, &payment.APIError{
			Status: http.StatusBadRequest, Code: "BAD_REQUEST_ERROR",
			Message: "the payment has been fully refunded already (nothing left to refund)",
		})
	}
	var r refundEntity
	err = p.do(ctx, request{
		method:         http.MethodPost,
		path:           "/v1/payments/" + url.PathEscape(paid.PaymentID) + "/refund",
		body:           newRefund{Amount: amount, Speed: "normal", Receipt: receipt},
		idempotencyKey: receipt,
		retryConflict:  true,
	}, &r)
	if payment.IsRefusal(err) {
		// An attempt whose answer was lost may have made it: then the
		// receipt finds it.
		if again, lerr := p.paymentRefunds(ctx, paid.PaymentID); lerr == nil {
			for _, r := range again {
				if r.Receipt == receipt {
					return r.refund(linkID), nil
				}
			}
		}
	}
	if err != nil {
		return payment.Refund{}, fmt.Errorf("refund of payment link %s: %w", linkID, err)
	}
	return r.refund(linkID), nil
}

// refundKey is the receipt and X-Refund-Idempotency value for an
// idempotency key: the key itself when Razorpay takes it (at least 10 of
// A-Z, a-z, 0-9, _ and -; at most 40, the receipt length this adapter
// allows itself, as the docs give none for refunds), else a digest of it.
func refundKey(key string) string {
	ok := len(key) >= 10 && len(key) <= 40
	for i := 0; ok && i < len(key); i++ {
		c := key[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "fg-" + hex.EncodeToString(sum[:16])
}

// paymentRefunds lists all of a payment's refunds (GET
// /v1/payments/{id}/refunds, page by page).
func (p *Provider) paymentRefunds(ctx context.Context, paymentID string) ([]refundEntity, error) {
	var all []refundEntity
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("razorpay: payment %s has more than %d refunds", paymentID, maxPages*pageSize)
		}
		var c collection[refundEntity]
		err := p.do(ctx, request{
			method: http.MethodGet,
			path:   "/v1/payments/" + url.PathEscape(paymentID) + "/refunds",
			query:  url.Values{"count": {strconv.Itoa(pageSize)}, "skip": {strconv.Itoa(page * pageSize)}},
		}, &c)
		if err != nil {
			return nil, err
		}
		for _, r := range c.Items {
			if !seen[r.ID] { // skip pages shift when a refund is made meanwhile
				seen[r.ID] = true
				all = append(all, r)
			}
		}
		if len(c.Items) < pageSize {
			return all, nil
		}
	}
}
