package stripepay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/flashgate/flashgate/origin/internal/payment"
)

// minSessionLife is the shortest lifetime Stripe gives a Checkout Session
// (expires_at is 30 minutes to 24 hours after creation), with a minute for
// the request's way there and the two clocks' skew. A hold is shorter:
// Expire ends the session when the hold ends.
const minSessionLife = 31 * time.Minute

// expandPayment is what a session's listing expands: its PaymentIntent, the
// PaymentIntent's last charge (the instrument that paid) and that charge's
// refunds, which Stripe leaves out of a charge unless asked. Four levels,
// the deepest Stripe expands.
const expandPayment = "payment_intent.latest_charge.refunds"

// CreateIntent makes a Checkout Session in payment mode for req: one line
// item "Order <order_id>" of req's amount and currency, req's metadata on
// the session and on the PaymentIntent it makes (so payments and refunds
// name the order in Stripe's dashboard too), the order id as
// client_reference_id, and req.ReturnURL (or Config.ReturnURL) as the page
// Stripe sends the shopper back to, paid or not. idempotencyKey is sent as
// Stripe's Idempotency-Key (kept 24 hours by Stripe).
//
// The session expires minSessionLife after req.ExpiresAt, not sooner:
// Stripe refuses a lifetime under 30 minutes, and Stripe's idempotency
// needs a repeat to send the very same parameters, so the expiry cannot
// depend on when the call is made; the session is created while its hold
// lives, so this is always late enough. When the hold ends first, the
// caller ends the session with Expire; a payment made in between is a late
// payment, refunded by the order flow. Without req.ExpiresAt, Stripe's
// default lifetime (24 hours) applies.
//
// Adaptive Pricing (paying in the shopper's own currency) is turned off
// for the session: the order flow compares what was paid, and refunded,
// with the order's amount in the sale's currency.
func (p *Provider) CreateIntent(ctx context.Context, req payment.NewIntent, idempotencyKey string) (payment.Intent, error) {
	orderID := req.Metadata["order_id"]
	params := &stripe.CheckoutSessionCreateParams{
		Mode: stripe.String(string(stripe.CheckoutSessionModePayment)),
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:   stripe.String(strings.ToLower(req.Currency)),
				UnitAmount: stripe.Int64(req.AmountMinor),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{
					Name: stripe.String(strings.TrimSpace("Order " + orderID)),
				},
			},
			Quantity: stripe.Int64(1),
		}},
		Metadata:          req.Metadata,
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: req.Metadata},
		AdaptivePricing:   &stripe.CheckoutSessionCreateAdaptivePricingParams{Enabled: stripe.Bool(false)},
	}
	if orderID != "" {
		params.ClientReferenceID = stripe.String(orderID)
	}
	if u := cmp.Or(req.ReturnURL, p.cfg.ReturnURL); u != "" {
		params.SuccessURL = stripe.String(u)
		params.CancelURL = stripe.String(u)
	}
	if !req.ExpiresAt.IsZero() {
		params.ExpiresAt = stripe.Int64(p.sessionExpiry(req.ExpiresAt).Unix())
	}
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	start := time.Now()
	s, err := p.sc.V1CheckoutSessions.Create(ctx, params)
	err = apiError(err)
	p.observe(callCreateIntent, start, err)
	if err != nil {
		return payment.Intent{}, fmt.Errorf("stripe: create checkout session: %w", err)
	}
	created := unix(s.Created)
	return payment.Intent{
		ID:          s.ID,
		Status:      payment.IntentRequiresPayment,
		AmountMinor: req.AmountMinor,
		Currency:    req.Currency,
		Metadata:    maps.Clone(req.Metadata),
		PayURL:      s.URL,
		ReturnURL:   req.ReturnURL,
		CreatedAt:   created,
		UpdatedAt:   created,
	}, nil
}

// sessionExpiry is when a session for a hold ending at holdEnd expires:
// minSessionLife after it, or — for a session made after its hold ended,
// which the order flow does not do — minSessionLife from now; at most 24
// hours from now, Stripe's longest.
func (p *Provider) sessionExpiry(holdEnd time.Time) time.Time {
	now := p.cfg.Clock.Now()
	t := holdEnd.Add(minSessionLife)
	if earliest := now.Add(minSessionLife); t.Before(earliest) {
		t = earliest
	}
	if latest := now.Add(24*time.Hour - time.Minute); t.After(latest) {
		t = latest
	}
	return t
}

// Expire ends an open Checkout Session now, for a hold that ends before
// the session would: its page stops taking payments. An already expired
// session is not an error (nil: the page is closed either way); a
// completed one returns an error wrapping ErrSessionComplete (a payment
// came first; its events settle it). Other refusals (an unknown session, a
// bad key) satisfy payment.IsRefusal; a failure to reach Stripe is a plain
// error, worth another try.
func (p *Provider) Expire(ctx context.Context, intentID string) error {
	start := time.Now()
	err := p.expire(ctx, intentID)
	p.observe(callExpire, start, err)
	return err
}

func (p *Provider) expire(ctx context.Context, id string) error {
	_, err := p.sc.V1CheckoutSessions.Expire(ctx, id, nil)
	if err == nil {
		return nil
	}
	err = apiError(err)
	if !payment.IsRefusal(err) {
		return fmt.Errorf("stripe: expire checkout session %s: %w", id, err)
	}
	// Stripe expires only open sessions: see what this one is.
	s, gerr := p.sc.V1CheckoutSessions.Retrieve(ctx, id, nil)
	if gerr != nil {
		return fmt.Errorf("stripe: expire checkout session %s: %w", id, err)
	}
	switch s.Status {
	case stripe.CheckoutSessionStatusExpired:
		return nil
	case stripe.CheckoutSessionStatusComplete:
		return fmt.Errorf("stripe: expire checkout session %s: %w", id, ErrSessionComplete)
	}
	return fmt.Errorf("stripe: expire checkout session %s: %w", id, err)
}

// Refund refunds amountMinor (0: all that is left) of the payment of the
// Checkout Session intentID: a Stripe Refund of the session's
// PaymentIntent, made under idempotencyKey (Stripe's Idempotency-Key; a
// repeat within Stripe's 24 hours gets the same refund back, a repeat after
// is a new request, which Stripe refuses once all is refunded). A session
// without a payment is refused (409 intent_not_succeeded, as the sandbox
// gateway answers), as is anything Stripe refuses.
//
// The refund's Status is as refundOf maps it: most card refunds succeed at
// once; others are pending, and end in refund.updated (and refund.failed
// when they fail). A refund that is not final when made, or whose answer
// is replayed from an earlier try, is read again for its current status.
func (p *Provider) Refund(ctx context.Context, intentID string, amountMinor int64, idempotencyKey string) (payment.Refund, error) {
	start := time.Now()
	r, err := p.refund(ctx, intentID, amountMinor, idempotencyKey)
	p.observe(callRefund, start, err)
	if err != nil {
		return payment.Refund{}, fmt.Errorf("stripe: refund checkout session %s: %w", intentID, err)
	}
	return r, nil
}

func (p *Provider) refund(ctx context.Context, sessionID string, amountMinor int64, key string) (payment.Refund, error) {
	s, err := p.sc.V1CheckoutSessions.Retrieve(ctx, sessionID, nil)
	if err != nil {
		return payment.Refund{}, apiError(err)
	}
	if s.PaymentIntent == nil || s.PaymentIntent.ID == "" {
		return payment.Refund{}, &payment.APIError{Status: http.StatusConflict, Code: "intent_not_succeeded",
			Message: "the checkout session has no payment to refund"}
	}
	params := &stripe.RefundCreateParams{
		PaymentIntent: stripe.String(s.PaymentIntent.ID),
		Metadata:      map[string]string{"checkout_session": s.ID},
	}
	if orderID := s.Metadata["order_id"]; orderID != "" {
		params.Metadata["order_id"] = orderID
	}
	if amountMinor > 0 {
		params.Amount = stripe.Int64(amountMinor)
	}
	if key != "" {
		params.SetIdempotencyKey(key)
	}
	r, err := p.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		return payment.Refund{}, apiError(err)
	}
	// Stripe replays the first answer to a repeat of the key (for 24
	// hours), which a refund may have outlived: it is read again, as is
	// one not final when made.
	replayed := r.LastResponse != nil && r.LastResponse.Header.Get("Idempotent-Replayed") == "true"
	if replayed || r.Status == stripe.RefundStatusPending || r.Status == stripe.RefundStatusRequiresAction {
		if now, err := p.sc.V1Refunds.Retrieve(ctx, r.ID, nil); err == nil {
			r = now
		}
	}
	return refundOf(r, sessionID), nil
}

// Intents lists the Checkout Sessions in payment mode created since the
// given time (zero: all Stripe keeps), newest first, each with its payment
// expanded: see intentOf for the mapping.
func (p *Provider) Intents(ctx context.Context, since time.Time) ([]payment.Intent, error) {
	start := time.Now()
	out, err := p.intents(ctx, since)
	p.observe(callListIntents, start, err)
	if err != nil {
		return nil, fmt.Errorf("stripe: list checkout sessions: %w", err)
	}
	return out, nil
}

func (p *Provider) intents(ctx context.Context, since time.Time) ([]payment.Intent, error) {
	params := &stripe.CheckoutSessionListParams{}
	params.Limit = stripe.Int64(100)
	if !since.IsZero() {
		params.CreatedRange = &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}
	}
	params.AddExpand("data." + expandPayment)
	var out []payment.Intent
	for s, err := range p.sc.V1CheckoutSessions.List(ctx, params) {
		if err != nil {
			return nil, apiError(err)
		}
		if s.Mode != stripe.CheckoutSessionModePayment {
			continue // a subscription or setup session: not ours
		}
		in, err := p.intentOf(ctx, s)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// Intent reads one Checkout Session, its payment expanded as Intents
// expands it.
func (p *Provider) Intent(ctx context.Context, id string) (payment.Intent, error) {
	start := time.Now()
	in, err := p.intent(ctx, id)
	p.observe(callGetIntent, start, err)
	if err != nil {
		return payment.Intent{}, fmt.Errorf("stripe: read checkout session %s: %w", id, err)
	}
	return in, nil
}

func (p *Provider) intent(ctx context.Context, id string) (payment.Intent, error) {
	params := &stripe.CheckoutSessionRetrieveParams{}
	params.AddExpand(expandPayment)
	s, err := p.sc.V1CheckoutSessions.Retrieve(ctx, id, params)
	if err != nil {
		return payment.Intent{}, apiError(err)
	}
	return p.intentOf(ctx, s)
}

// intentOf maps a Checkout Session, its payment expanded when it has one,
// onto an Intent:
//
//   - Status: sessionStatus.
//   - AmountMinor and Currency: the session's amount_total and currency
//     (upper case).
//   - Payer: the instrument of the PaymentIntent's latest charge (payerOf).
//   - Refunds: all that charge's refunds, oldest first, each with its
//     status (refundOf). When they are not all in it (more than a page,
//     or not expanded while it has refunded something), they are listed
//     from the API under ctx.
func (p *Provider) intentOf(ctx context.Context, s *stripe.CheckoutSession) (payment.Intent, error) {
	in := payment.Intent{
		ID:          s.ID,
		Status:      sessionStatus(s),
		AmountMinor: s.AmountTotal,
		Currency:    strings.ToUpper(string(s.Currency)),
		Metadata:    s.Metadata,
		PayURL:      s.URL,
		ReturnURL:   s.SuccessURL,
		CreatedAt:   unix(s.Created),
	}
	in.UpdatedAt = in.CreatedAt
	if s.PaymentIntent == nil || s.PaymentIntent.LatestCharge == nil {
		return in, nil
	}
	ch := s.PaymentIntent.LatestCharge
	in.Payer = payerOf(ch.PaymentMethodDetails)
	if ch.Created > s.Created {
		in.UpdatedAt = unix(ch.Created)
	}
	var refunds []*stripe.Refund
	if ch.Refunds != nil {
		refunds = ch.Refunds.Data
	}
	if ch.Refunds != nil && ch.Refunds.HasMore || ch.Refunds == nil && ch.AmountRefunded > 0 {
		refunds = refunds[:0:0]
		params := &stripe.RefundListParams{Charge: stripe.String(ch.ID)}
		params.Limit = stripe.Int64(100)
		for r, err := range p.sc.V1Refunds.List(ctx, params) {
			if err != nil {
				return payment.Intent{}, apiError(err)
			}
			refunds = append(refunds, r)
		}
	}
	for _, r := range refunds {
		in.Refunds = append(in.Refunds, refundOf(r, s.ID))
	}
	slices.SortStableFunc(in.Refunds, func(a, b payment.Refund) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return in, nil
}

// sessionStatus is a Checkout Session's Intent status:
//
//   - open: payment.IntentRequiresPayment.
//   - expired: payment.IntentFailed (it can no longer be paid).
//   - complete and paid: payment.IntentSucceeded.
//   - complete and unpaid: a delayed payment method (a bank debit, a
//     voucher) is under way, and the PaymentIntent, when expanded, says how
//     it ended: succeeded (the session is updated a moment later) is
//     payment.IntentSucceeded; back to requires_payment_method, or
//     canceled, is payment.IntentFailed (the session cannot be paid
//     again); processing, or not expanded, is
//     payment.IntentRequiresPayment until
//     checkout.session.async_payment_succeeded or _failed.
//   - anything else (no_payment_required, which a priced line item never
//     is): payment.IntentRequiresPayment, which repairs nothing.
func sessionStatus(s *stripe.CheckoutSession) string {
	switch s.Status {
	case stripe.CheckoutSessionStatusExpired:
		return payment.IntentFailed
	case stripe.CheckoutSessionStatusComplete:
		if s.PaymentStatus == stripe.CheckoutSessionPaymentStatusPaid {
			return payment.IntentSucceeded
		}
		if s.PaymentStatus != stripe.CheckoutSessionPaymentStatusUnpaid || s.PaymentIntent == nil {
			return payment.IntentRequiresPayment
		}
		switch s.PaymentIntent.Status {
		case stripe.PaymentIntentStatusSucceeded:
			return payment.IntentSucceeded
		case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusCanceled:
			return payment.IntentFailed
		}
	}
	return payment.IntentRequiresPayment
}

// payerOf names the instrument a charge was paid with: "card:<fingerprint>"
// for a card (online, presented, Interac: Stripe gives one card one
// fingerprint across them; a wallet such as Apple Pay reports the card it
// holds, which may be a device-specific number), "<type>:<id>" with the
// stable id Stripe gives other methods (a bank account's fingerprint for
// bank debits, PayPal's payer id, Cash App's buyer id, the wallet
// fingerprint of Alipay, WeChat Pay and Swish), "" for a method with none
// (Link, vouchers, redirects such as iDEAL).
func payerOf(d *stripe.ChargePaymentMethodDetails) string {
	if d == nil {
		return ""
	}
	var kind, id string
	switch {
	case d.Card != nil:
		kind, id = "card", d.Card.Fingerprint
	case d.CardPresent != nil:
		kind, id = "card", d.CardPresent.Fingerprint
	case d.InteracPresent != nil:
		kind, id = "card", d.InteracPresent.Fingerprint
	case d.USBankAccount != nil:
		kind, id = "us_bank_account", d.USBankAccount.Fingerprint
	case d.SEPADebit != nil:
		kind, id = "sepa_debit", d.SEPADebit.Fingerprint
	case d.BACSDebit != nil:
		kind, id = "bacs_debit", d.BACSDebit.Fingerprint
	case d.AUBECSDebit != nil:
		kind, id = "au_becs_debit", d.AUBECSDebit.Fingerprint
	case d.ACSSDebit != nil:
		kind, id = "acss_debit", d.ACSSDebit.Fingerprint
	case d.ACHDebit != nil:
		kind, id = "ach_debit", d.ACHDebit.Fingerprint
	case d.Paypal != nil:
		kind, id = "paypal", d.Paypal.PayerID
	case d.CashApp != nil:
		kind, id = "cashapp", d.CashApp.BuyerID
	case d.Alipay != nil:
		kind, id = "alipay", d.Alipay.Fingerprint
	case d.WeChatPay != nil:
		kind, id = "wechat_pay", d.WeChatPay.Fingerprint
	case d.Swish != nil:
		kind, id = "swish", d.Swish.Fingerprint
	}
	if id == "" {
		return ""
	}
	return kind + ":" + id
}

// refundOf maps a Stripe Refund of the session sessionID's payment: its
// status succeeded, failed or canceled (payment.RefundFailed: it gave
// nothing back), or pending (requires_action and any status Stripe adds).
func refundOf(r *stripe.Refund, sessionID string) payment.Refund {
	status := payment.RefundPending
	switch r.Status {
	case stripe.RefundStatusSucceeded:
		status = payment.RefundSucceeded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		status = payment.RefundFailed
	}
	return payment.Refund{ID: r.ID, IntentID: sessionID, AmountMinor: r.Amount, Status: status, CreatedAt: unix(r.Created)}
}

// unix is a Stripe timestamp (Unix seconds) as a time; zero stays zero.
func unix(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

// ClosePage is payment.PageCloser's: it expires the Checkout Session. A
// session completed first (paid, or a delayed payment under way) wraps
// payment.ErrPaymentStarted as well as ErrSessionComplete.
func (p *Provider) ClosePage(ctx context.Context, intentID string) error {
	err := p.Expire(ctx, intentID)
	if errors.Is(err, ErrSessionComplete) {
		return fmt.Errorf("%w: %w", payment.ErrPaymentStarted, err)
	}
	return err
}

var _ payment.PageCloser = (*Provider)(nil)
