package razorpay

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// minFrom is the earliest `from` Fetch All Payments accepts ("from must be
// between 946684800 and 4765046400").
const minFrom = 946684800

// Intents lists the Payment Links paid since the given time (zero: as far
// back as Razorpay lists), for the reconciler: each captured or refunded
// payment made since then (GET /v1/payments, from since to now, 100 a
// page) with its link (looked up by payment id) and, when it has refunded
// anything, its refunds: a payment whose only refunds failed is listed
// without them (its amount_refunded is 0; asking every payment would cost
// a call each), and Intent has them. A link nobody paid is not listed:
// Razorpay documents no way to list links by time (see the package doc).
func (p *Provider) Intents(ctx context.Context, since time.Time) ([]payment.Intent, error) {
	start := time.Now()
	ins, err := p.intents(ctx, since)
	p.observe(callListIntents, start, err)
	return ins, err
}

func (p *Provider) intents(ctx context.Context, since time.Time) ([]payment.Intent, error) {
	pays, err := p.payments(ctx, since, p.cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("list payment links: %w", err)
	}
	var out []payment.Intent
	listed := map[string]int{} // link id → index in out
	for _, pe := range pays {
		if pe.Status != paymentCaptured && pe.Status != paymentRefunded {
			continue // not taken (created, authorized, failed)
		}
		l, ok, err := p.linkOfPayment(ctx, pe.ID)
		if err != nil {
			return nil, fmt.Errorf("list payment links: payment %s: %w", pe.ID, err)
		}
		if !ok {
			continue // not made on a Payment Link: not ours
		}
		if _, dup := listed[l.ID]; dup {
			continue
		}
		in := l.intent()
		// Money taken is a payment, whatever the link says since: a UPI
		// payment may be confirmed after its link expired or was
		// cancelled, and it must reach the order flow, which refunds it.
		in.Status, in.AmountMinor = payment.IntentSucceeded, pe.Amount
		in.Payer = pe.payer()
		if pe.AmountRefunded > 0 {
			rs, err := p.paymentRefunds(ctx, pe.ID)
			if err != nil {
				return nil, fmt.Errorf("list payment links: refunds of %s: %w", pe.ID, err)
			}
			in.Refunds = refunds(l.ID, rs)
		}
		listed[l.ID] = len(out)
		out = append(out, in)
	}
	return out, nil
}

// payments lists the payments made from since to until (GET /v1/payments),
// page by page. until is fixed so that payments made meanwhile do not
// shift the pages.
func (p *Provider) payments(ctx context.Context, since, until time.Time) ([]paymentEntity, error) {
	q := url.Values{"to": {strconv.FormatInt(until.Unix(), 10)}, "count": {strconv.Itoa(pageSize)}}
	if !since.IsZero() {
		from := max(since.Unix(), minFrom)
		q.Set("from", strconv.FormatInt(from, 10))
	}
	var all []paymentEntity
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("more than %d payments since %s", maxPages*pageSize, since.UTC().Format(time.RFC3339))
		}
		q.Set("skip", strconv.Itoa(page*pageSize))
		var c collection[paymentEntity]
		if err := p.do(ctx, request{method: http.MethodGet, path: "/v1/payments", query: q}, &c); err != nil {
			return nil, err
		}
		for _, pe := range c.Items {
			if !seen[pe.ID] {
				seen[pe.ID] = true
				all = append(all, pe)
			}
		}
		if len(c.Items) < pageSize {
			return all, nil
		}
	}
}

// Intent reads one Payment Link (GET /v1/payment_links/{id}) as Intents
// lists it: with its captured payment, if any (GET /v1/payments/{id}: the
// payer, and money taken whatever the link says since), and that
// payment's refunds, all of them (a failed refund is not in the payment's
// amount_refunded, so they are always asked for).
func (p *Provider) Intent(ctx context.Context, linkID string) (payment.Intent, error) {
	start := time.Now()
	in, err := p.intent(ctx, linkID)
	p.observe(callGetIntent, start, err)
	if err != nil {
		return payment.Intent{}, fmt.Errorf("read payment link %s: %w", linkID, err)
	}
	return in, nil
}

func (p *Provider) intent(ctx context.Context, linkID string) (payment.Intent, error) {
	l, err := p.link(ctx, linkID)
	if err != nil {
		return payment.Intent{}, err
	}
	in := l.intent()
	switch len(l.Payments) {
	case 0:
		return in, nil
	case 1:
	default:
		return payment.Intent{}, fmt.Errorf("%d captured payments", len(l.Payments))
	}
	var pe paymentEntity
	path := "/v1/payments/" + url.PathEscape(l.Payments[0].PaymentID)
	if err := p.do(ctx, request{method: http.MethodGet, path: path}, &pe); err != nil {
		return payment.Intent{}, err
	}
	if pe.Status == paymentCaptured || pe.Status == paymentRefunded {
		in.Status, in.AmountMinor, in.Payer = payment.IntentSucceeded, pe.Amount, pe.payer()
	}
	rs, err := p.paymentRefunds(ctx, pe.ID)
	if err != nil {
		return payment.Intent{}, err
	}
	in.Refunds = refunds(l.ID, rs)
	return in, nil
}
