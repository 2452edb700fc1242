package orders

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

// Report is what one reconciliation found.
type Report struct {
	// Skipped: another origin was reconciling; this one did nothing.
	Skipped  bool
	Intents  int            // gateway intents compared
	Repaired map[string]int // differences repaired, by kind
	Alerts   map[string]int // differences left for a person, by kind
}

// reconcileLock is the Postgres lock one reconciling origin holds: every
// run asks the provider for the same things, so one at a time does.
const reconcileLock = "reconcile"

// The listing is incremental: a run lists the intents created since
// shortly before the last listing began (listingOverlap), and the whole
// ReconcileWindow only every fullListingEvery.
const (
	// listingOverlap covers what may have changed since the last listing
	// in an intent created before it: a payment on a page still open (a
	// page lives a hold and its grace, and is closed at most pageWindow
	// after), or one listed before its capture.
	listingOverlap = 2 * time.Hour
	// fullListingEvery bounds how long a change to an older intent (a
	// delayed payment method that succeeds days later, its webhook lost)
	// waits to be found.
	fullListingEvery = time.Hour
)

// listing remembers this origin's listings, for listSince.
type listing struct {
	mu       sync.Mutex
	last     time.Time // when the last complete listing began
	lastFull time.Time // when the last complete listing of the whole window began
}

// listSince is how far back a listing at now reaches, and whether that is
// the whole window.
func (l *listing) listSince(now time.Time, window time.Duration) (since time.Time, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() || now.Sub(l.lastFull) >= fullListingEvery {
		return now.Add(-window), true
	}
	since = l.last.Add(-listingOverlap)
	if oldest := now.Add(-window); since.Before(oldest) {
		since = oldest
	}
	return since, false
}

// listed records a complete listing that began at at.
func (l *listing) listed(at time.Time, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = at
	if full {
		l.lastFull = at
	}
}

// Reconcile compares the gateway's intents of the last ReconcileWindow with
// our orders and repairs what it can: a payment the gateway took that we
// never recorded (its webhook lost, or the origin stopped between the
// gateway's success and our write) is settled as the webhook would have
// been; a failure likewise; a refund owed but not issued is issued; one
// issued but not recorded is recorded. The rest is counted and logged as an
// alert. Every repair is safe to repeat, so origins may reconcile at once.
//
// One origin reconciles at a time (reconcileLock); a run that finds
// another at it is Skipped.
func (s *Service) Reconcile(ctx context.Context) (Report, error) {
	rep := Report{Repaired: map[string]int{}, Alerts: map[string]int{}}
	unlock, ok, err := s.ledger.TryLock(ctx, reconcileLock)
	if err != nil {
		return rep, err
	}
	if !ok {
		rep.Skipped = true
		return rep, nil
	}
	defer unlock()
	listedAt := s.opts.Clock.Now()
	var errs []error
	// Owed refunds and open pages first: they need no listing, so a slow or
	// failing one (the provider down, a long window) does not hold them up.
	// Refunds owed on orders outside the window, or whose issue failed.
	owed, err := s.ledger.OrdersOwingRefunds(ctx, 1000)
	if err != nil {
		errs = append(errs, err)
	}
	for _, o := range owed {
		err := s.issueRefund(ctx, o)
		switch {
		case errors.Is(err, errRefundFailed):
			// Owed again, under a new key: the next run issues it.
			s.refundFailed(&rep, o, err)
		case errors.Is(err, errRefundMovedOn):
			// A webhook or another origin got there first.
		case payment.IsRefusal(err):
			// The gateway says no: retrying will not change its mind.
			s.alert(&rep, "refund_refused", "the gateway refuses a refund we owe", "order", o.ID, "intent", o.IntentID, "err", err)
			if err := s.ledger.TouchOrder(ctx, o.ID); err != nil {
				errs = append(errs, err)
			}
		case err != nil:
			errs = append(errs, err)
		default:
			s.repair(&rep, "refund_issued", o.ID)
		}
	}
	if err := s.followRefunds(ctx, &rep, listedAt); err != nil {
		errs = append(errs, err)
	}
	// Payment pages still open after their hold ended.
	if closer, ok := s.gateway.(payment.PageCloser); ok {
		if err := s.closePages(ctx, &rep, closer, listedAt); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.compareIntents(ctx, &rep, listedAt); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// compareIntents compares the provider's intents, listed at listedAt as
// far back as listSince says, with our orders, and repairs what it can
// (reconcileIntent).
func (s *Service) compareIntents(ctx context.Context, rep *Report, listedAt time.Time) error {
	since, full := s.listing.listSince(listedAt, s.opts.ReconcileWindow)
	intents, err := s.gateway.Intents(ctx, since)
	if err != nil {
		return err
	}
	rep.Intents = len(intents)
	ids := make([]string, 0, len(intents))
	for _, in := range intents {
		if in.OrderID() != "" {
			ids = append(ids, in.OrderID())
		}
	}
	orders, err := s.ledger.OrdersByID(ctx, ids)
	if err != nil {
		return err
	}
	var errs []error
	for _, in := range intents {
		o, ok := orders[in.OrderID()]
		if !ok {
			s.alert(rep, "unknown_order", "gateway intent names no order of ours", "intent", in.ID, "order", in.OrderID())
			continue
		}
		// An order changed since the listing is compared with a stale
		// record: its differences may be none. Next run.
		settledSince := !o.UpdatedAt.Before(listedAt.Add(-time.Second))
		if err := s.reconcileIntent(ctx, rep, o, in, settledSince); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		s.listing.listed(listedAt, full) // else the next run lists as far back again
	}
	return errors.Join(errs...)
}

// pageWindow is how long after its hold's end a provider's page may
// still be open: a Stripe session expires 31 minutes after it, a Razorpay
// link 16 minutes after it at most (their adapters). Older pages closed by
// themselves, and are not asked about.
const pageWindow = time.Hour

// closePages closes the provider's payment page of each order whose hold
// ended in the last pageWindow while the page was open — the order waiting
// for its payment, or cancelled by the hold's end — so that a provider
// whose pages outlive holds (PageCloser) does not take the shopper's money
// only to refund it. An order still waiting is then settled as a failed
// payment (its unit is back in line already, or goes back now); the page's
// own event (expired, cancelled) later finds it settled. A page paid on
// first is left to its events: a late payment, refunded. A page the
// provider refuses to close (unknown to it: an intent of another provider
// or account) is alerted on. Each page is asked about once.
func (s *Service) closePages(ctx context.Context, rep *Report, closer payment.PageCloser, now time.Time) error {
	past, err := s.ledger.OrdersPastHold(ctx, now.Add(-pageWindow), now, 1000)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range past {
		err := closer.ClosePage(ctx, o.IntentID)
		switch {
		case errors.Is(err, payment.ErrPaymentStarted):
		case payment.IsRefusal(err):
			s.alert(rep, "page_close_refused", "the provider refuses to close a payment page", "order", o.ID, "intent", o.IntentID, "err", err)
		case err != nil:
			errs = append(errs, fmt.Errorf("close the payment page of order %s: %w", o.ID, err))
			continue
		case o.Status == ledger.OrderPendingPayment:
			after, err := s.settle(ctx, o.ID, "", "", func(_ *settling, o ledger.Order) (ledger.Order, error) { return s.failed(ctx, o) })
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if after.Status != o.Status {
				s.repair(rep, "page_closed", o.ID)
			}
		}
		if err := s.ledger.MarkPageClosed(ctx, o.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Service) reconcileIntent(ctx context.Context, rep *Report, o ledger.Order, in payment.Intent, changedSinceListing bool) error {
	alert := func(kind, msg string) {
		if !changedSinceListing {
			s.alert(rep, kind, msg, "order", o.ID, "intent", in.ID)
		}
	}
	if o.IntentID == "" {
		if err := s.ledger.SetOrderIntent(ctx, o.ID, in.ID, in.PayURL, time.Time{}); err != nil {
			return err
		}
		o.IntentID = in.ID
	}
	if o.IntentID != in.ID {
		s.alert(rep, "second_intent", "a second gateway intent for one order", "order", o.ID, "intent", in.ID)
		if in.Status == payment.IntentSucceeded && in.Refunded() < in.AmountMinor {
			// Money on it never buys the unit: it goes back.
			if _, err := s.gateway.Refund(ctx, in.ID, 0, "intent-"+in.ID+"-refund"); err != nil {
				return fmt.Errorf("refund second intent %s: %w", in.ID, err)
			}
			s.repair(rep, "second_intent_refunded", o.ID)
		}
		return nil
	}
	settle := func(kind string, change func(*settling, ledger.Order) (ledger.Order, error)) error {
		after, err := s.settle(ctx, o.ID, "", "", change)
		if err != nil {
			return err
		}
		if after.Status != o.Status {
			s.repair(rep, kind, o.ID)
		}
		s.refundIfOwed(ctx, after)
		return nil
	}
	switch in.Status {
	case payment.IntentSucceeded:
		switch {
		case o.Status == ledger.OrderPendingPayment || o.Status == ledger.OrderCancelled:
			return settle("missed_payment", func(st *settling, o ledger.Order) (ledger.Order, error) { return s.paid(ctx, st, o, in) })
		case o.Status == ledger.OrderRefunded && !(o.RefundStatus == ledger.RefundIssued && o.RefundedAt.IsZero()):
			// (A refund on its way is followRefunds': a listing may
			// leave out refunds that gave nothing back.)
			return s.reconcileRefund(ctx, rep, o, in, alert)
		case o.Status == ledger.OrderPaid && in.Refunded() > 0:
			alert("refunded_at_gateway_only", "the gateway refunded a paid order")
		}
	case payment.IntentFailed:
		switch o.Status {
		case ledger.OrderPendingPayment:
			return settle("missed_failure", func(_ *settling, o ledger.Order) (ledger.Order, error) { return s.failed(ctx, o) })
		case ledger.OrderPaid:
			alert("paid_but_failed_at_gateway", "an order is paid but its payment failed")
		}
	case payment.IntentRequiresPayment:
		if o.Status == ledger.OrderPaid {
			alert("paid_but_unpaid_at_gateway", "an order is paid but the gateway has no payment")
		}
	}
	return nil
}

// refundFollowRuns is how many reconciliations pass between two questions
// about one refund on its way: a bank's refund takes days, and each
// question is a call to the provider.
const refundFollowRuns = 10

// followRefunds asks the gateway about each refund it has taken but not
// yet reported done (up to 100 a run, those asked about longest ago
// first), whenever it was made: the listing's window ends long before a
// bank's refund may fail. Each is compared as reconcileRefund does.
func (s *Service) followRefunds(ctx context.Context, rep *Report, now time.Time) error {
	inFlight, err := s.ledger.RefundsInFlight(ctx, now.Add(-refundFollowRuns*s.opts.ReconcileEvery), 100)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range inFlight {
		in, err := s.gateway.Intent(ctx, o.IntentID)
		if err == nil {
			err = s.reconcileRefund(ctx, rep, o, in, func(kind, msg string) {
				s.alert(rep, kind, msg, "order", o.ID, "intent", o.IntentID, "refund", o.RefundID)
			})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("follow the refund of order %s: %w", o.ID, err))
		}
		if err := s.ledger.TouchOrder(ctx, o.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcileRefund compares a refunded order's refund with the refunds of
// its intent, in: a refund that gives all back while the order still owes
// one is the order's, its record lost (refund_recorded); the order's own
// refund, done, is dated (refund_completed), and failed, is owed again and
// issued anew (refund_failed, an alert too); an order's refund the gateway
// does not know is alerted on (alert).
func (s *Service) reconcileRefund(ctx context.Context, rep *Report, o ledger.Order, in payment.Intent, alert func(kind, msg string)) error {
	var r payment.Refund
	switch o.RefundStatus {
	case ledger.RefundOwed:
		if in.Refunded() < in.AmountMinor {
			return nil // the owed refunds' loop issues it
		}
		for _, got := range in.Refunds {
			if got.Status != payment.RefundFailed {
				r = got
			}
		}
	case ledger.RefundIssued:
		got, ok := in.RefundByID(o.RefundID)
		if !ok {
			alert("refund_missing_at_gateway", "a refund we recorded is not at the gateway")
			return nil
		}
		r = got
	default:
		return nil
	}
	// What changed is judged against the order as locked, not as listed: a
	// webhook may have recorded the same news (and alerted) in between.
	var before ledger.Order
	after, err := s.ledger.ChangeOrder(ctx, o.ID, "", "", func(o ledger.Order) (ledger.Order, error) {
		before = o
		return recordRefund(o, r, s.opts.Clock.Now()), nil
	})
	if err != nil {
		return err
	}
	switch {
	case before.RefundStatus == ledger.RefundOwed && after.RefundStatus == ledger.RefundIssued:
		s.repair(rep, "refund_recorded", o.ID)
	case before.RefundStatus == ledger.RefundIssued && after.RefundStatus == ledger.RefundOwed:
		s.repair(rep, "refund_failed", o.ID)
		s.refundFailed(rep, before, fmt.Errorf("%w (refund %s)", errRefundFailed, r.ID))
		s.refundIfOwed(ctx, after)
	case before.RefundedAt.IsZero() && !after.RefundedAt.IsZero():
		s.repair(rep, "refund_completed", o.ID)
	}
	return nil
}

func (s *Service) repair(rep *Report, kind, orderID string) {
	rep.Repaired[kind]++
	s.m.repairs.WithLabelValues(kind).Inc()
	s.log.Warn("reconciliation repaired an order", "kind", kind, "order", orderID)
}

func (s *Service) alert(rep *Report, kind, msg string, args ...any) {
	rep.Alerts[kind]++
	s.m.alerts.WithLabelValues(kind).Inc()
	s.log.Error("payment alert: "+msg, append([]any{"kind", kind}, args...)...)
}

// Run reconciles every ReconcileEvery until ctx ends, starting shortly
// after start-up (an origin that stopped mid-payment finds it at once).
func (s *Service) Run(ctx context.Context) {
	if s.opts.ReconcileEvery <= 0 {
		return
	}
	t := s.opts.Clock.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, cancel := context.WithTimeout(ctx, s.opts.ReconcileEvery+time.Minute)
		rep, err := s.Reconcile(c)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.m.reconciles.WithLabelValues("failed").Inc()
			s.log.Warn("reconciliation incomplete; will run again", "err", err)
		} else if err == nil && rep.Skipped {
			s.m.reconciles.WithLabelValues("skipped").Inc()
		} else if err == nil {
			s.m.reconciles.WithLabelValues("ok").Inc()
			if len(rep.Repaired) > 0 || len(rep.Alerts) > 0 {
				s.log.Info("reconciliation done", "intents", rep.Intents, "repaired", rep.Repaired, "alerts", rep.Alerts)
			}
		}
		t.Reset(s.opts.ReconcileEvery)
	}
}
