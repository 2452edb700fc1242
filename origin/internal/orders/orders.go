// Package orders turns a hold into a paid order exactly once. It creates
// the order and its payment intent at the gateway, extends the hold once so
// a slow payer is not cut off, settles the gateway's webhooks (paid: the
// hold is sold; failed: the unit returns at once; paid too late: the money
// goes back; paid by an instrument that has paid for another order of a
// one-unit-per-payer sale: the unit returns at once and the money goes
// back), and reconciles the gateway's records with ours.
//
// Redis decides what happens to a unit (the pay and release scripts, one
// atomic step each); Postgres records what happened to the order, under a
// row lock and together with the event's id, so a webhook delivered five
// times changes one order once. The one-unit-per-payer rule is Postgres's
// to decide, before Redis sells: a payment claims its payer in the
// transaction that marks its order paid (ledger.OrderTx.ClaimPayer).
package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/flashgate/flashgate/origin/internal/sales"
)

// Errors the API maps to answers. A reservation's lookup answers with the
// sales package's: sales.ErrUnknownReservation and sales.ErrRestoring.
var (
	// ErrUnknownOrder: no such order for this account.
	ErrUnknownOrder = errors.New("orders: no such order")
	// ErrHoldExpired: the reservation's hold is gone; it cannot be paid.
	ErrHoldExpired = errors.New("orders: the hold has expired")
)

// Reservations finds a reservation for its owner wherever it stands.
type Reservations interface {
	AccountReservation(ctx context.Context, account, id string) (intent.Reservation, error)
}

var _ Reservations = (*sales.Service)(nil)

// Options tune the service; zero values take the defaults.
type Options struct {
	// Grace is how much longer a hold lives once its payment has started,
	// given once per hold; 0 means none.
	Grace time.Duration
	// ReturnURL is where the gateway's page sends the shopper afterwards,
	// with "sale=<id>&order=<id>" added to its query. "" means no link back.
	ReturnURL string
	// ReconcileEvery is how often Run reconciles; 0 means Run returns at
	// once (another origin reconciles). From app.Config.ReconcileInterval.
	ReconcileEvery time.Duration
	// ReconcileWindow is how far back the gateway's intents are compared;
	// 0 means 48 hours.
	ReconcileWindow time.Duration
	// Clock is the service's time (webhook signatures' age, paid_at) and
	// Run's; nil means clock.Real.
	Clock clock.Clock
	// IntentWait is how long an order request waits for the gateway to
	// make the payment intent before answering without it (the shopper's
	// page then reads the order until its payment link is there); 0 means
	// DefaultIntentWait. The intent is made whatever the request does.
	IntentWait time.Duration
}

// DefaultIntentWait is Options.IntentWait's default: a gateway that
// answers in time puts its payment link in the order's first answer; a
// slow one never holds an order request, or the edge's connection it uses,
// for longer.
const DefaultIntentWait = 100 * time.Millisecond

// intentBudget bounds one order's intent creation, retries included: the
// call runs on after the request that started it has been answered.
const intentBudget = 30 * time.Second

// Service is the order and payment flow. It is safe for concurrent use.
type Service struct {
	checkout     *checkout.Store
	ledger       *ledger.Store
	catalog      *catalog.Catalog
	reservations Reservations
	gateway      payment.Provider
	opts         Options
	log          *slog.Logger
	m            metrics
	// intents makes each order's payment intent once at a time, however
	// many requests for the order (double clicks, the page's reads) wait.
	intents singleflight.Group
	listing listing // the reconciler's listings
}

// New returns a Service; Run starts its reconciler.
func New(cs *checkout.Store, ls *ledger.Store, cat *catalog.Catalog, rs Reservations, gw payment.Provider, opts Options, log *slog.Logger, reg prometheus.Registerer) *Service {
	if opts.ReconcileWindow <= 0 {
		opts.ReconcileWindow = 48 * time.Hour
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.IntentWait <= 0 {
		opts.IntentWait = DefaultIntentWait
	}
	return &Service{checkout: cs, ledger: ls, catalog: cat, reservations: rs, gateway: gw, opts: opts, log: log, m: newMetrics(reg)}
}

// Create makes the order of a held reservation and its payment intent, or
// returns the order the reservation already has (created = false) — a
// double click makes one order and one intent. The order comes back
// without its payment (IntentID "") when the gateway has not made the
// intent within Options.IntentWait; it is being made. It fails with
// sales.ErrUnknownReservation when the reservation is not the account's,
// and ErrHoldExpired when its hold is gone (unless its order is paid).
func (s *Service) Create(ctx context.Context, account, reservationID, idempotencyKey string) (_ ledger.Order, created bool, err error) {
	res, err := s.reservations.AccountReservation(ctx, account, reservationID)
	if err != nil {
		return ledger.Order{}, false, err
	}
	if res.Status != intent.Held {
		// Only a paid order outlives its hold.
		o, err := s.ledger.OrderOfReservation(ctx, reservationID)
		switch {
		case err == nil:
			o, err = s.existing(ctx, o)
			return o, false, err
		case errors.Is(err, ledger.ErrNotFound):
			return ledger.Order{}, false, ErrHoldExpired
		}
		return ledger.Order{}, false, err
	}
	sale, err := s.catalog.Get(ctx, res.Sale)
	if err != nil {
		return ledger.Order{}, false, err
	}
	price, ok := priceOf(sale, res.SKU)
	if !ok {
		return ledger.Order{}, false, fmt.Errorf("reservation %s: sku %s is not in sale %s", reservationID, res.SKU, res.Sale)
	}
	id, err := newOrderID()
	if err != nil {
		return ledger.Order{}, false, err
	}
	o, created, err := s.ledger.CreateOrder(ctx, ledger.Order{
		ID: id, ReservationID: reservationID, Sale: res.Sale, SKU: res.SKU, Account: account,
		AmountMinor: price.PriceMinor, Currency: price.Currency, IdempotencyKey: idempotencyKey,
	})
	if err != nil {
		return ledger.Order{}, false, err
	}
	if !created {
		// A repeat: the insert found the reservation's order (one
		// statement for a new order, the common case, and two for this).
		o, err = s.existing(ctx, o)
		return o, false, err
	}
	s.m.ordersCreated.Inc()
	o, err = s.startPayment(ctx, o)
	return o, true, err
}

// existing answers a repeated order request: a paid order, or a pending
// one whose hold still lives (its payment is finished off if the first
// request stopped half-way); any other order's hold is gone.
func (s *Service) existing(ctx context.Context, o ledger.Order) (ledger.Order, error) {
	switch o.Status {
	case ledger.OrderPaid:
		return o, nil
	case ledger.OrderPendingPayment:
		return s.startPayment(ctx, o)
	}
	return ledger.Order{}, ErrHoldExpired
}

// startPayment extends a pending order's hold once and makes sure its
// intent exists at the gateway. Both steps are safe to repeat, so a
// request that failed half-way is finished by the shopper's retry. It
// never hands out a way to pay for a hold that is gone.
func (s *Service) startPayment(ctx context.Context, o ledger.Order) (ledger.Order, error) {
	ext, err := s.checkout.ExtendForPayment(ctx, o.Sale, hold(o), o.ID, s.opts.Grace)
	if err != nil {
		return ledger.Order{}, err
	}
	switch {
	case ext.Held:
		if o.IntentID != "" && o.HoldUntil.IsZero() {
			// The intent was recorded by its webhook or the reconciler,
			// without the hold's expiry: record it now, so that the page
			// is closed when the hold ends.
			if err := s.ledger.SetOrderIntent(ctx, o.ID, o.IntentID, o.PayURL, ext.ExpiresAt); err != nil {
				return ledger.Order{}, err
			}
		}
		if o.IntentID != "" {
			// A repeat: the hold's expiry was recorded with the intent.
			return o, nil
		}
	case ext.Status == intent.Paid:
		// Paid in Redis; the webhook's write (or the reconciler) records it.
		return o, nil
	default:
		if err := s.holdGone(ctx, o.ReservationID, ext.Status); err != nil {
			return ledger.Order{}, err
		}
		if o.IntentID == "" {
			// No payment can have started: the order is void.
			if _, err := s.ledger.ChangeOrder(ctx, o.ID, "", "", func(o ledger.Order) (ledger.Order, error) {
				if o.Status == ledger.OrderPendingPayment && o.IntentID == "" {
					o.Status = ledger.OrderCancelled
				}
				return o, nil
			}); err != nil {
				return ledger.Order{}, err
			}
		}
		// With an intent, the shopper may be paying right now: the webhook
		// or the reconciler settles the order (a refund if money comes).
		return ledger.Order{}, ErrHoldExpired
	}
	return s.awaitIntent(ctx, o, ext.ExpiresAt)
}

// awaitIntent has the order's payment intent made at the gateway and
// waits up to Options.IntentWait for it. The call is not the request's: it
// runs on (within intentBudget) when the wait is over, so a slow gateway
// makes the shopper read the order again rather than hold a connection,
// and concurrent requests for one order share one call. An order answered
// without its intent gets it from whichever request comes next once the
// call is done (a crash in between is finished the same way).
func (s *Service) awaitIntent(ctx context.Context, o ledger.Order, holdUntil time.Time) (ledger.Order, error) {
	made := s.intents.DoChan(o.ID, func() (any, error) {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), intentBudget)
		defer cancel()
		in, err := s.makeIntent(c, o, holdUntil)
		if err != nil {
			s.log.Warn("payment intent not made; the order's next read tries again", "order", o.ID, "err", err)
		}
		return in, err
	})
	wait := time.NewTimer(s.opts.IntentWait)
	defer wait.Stop()
	select {
	case r := <-made:
		if r.Err != nil {
			s.m.intents.WithLabelValues("failed").Inc()
			return ledger.Order{}, r.Err
		}
		in := r.Val.(payment.Intent)
		o.IntentID, o.PayURL = in.ID, in.PayURL
		s.m.intents.WithLabelValues("in_time").Inc()
	case <-wait.C:
		s.m.intents.WithLabelValues("late").Inc()
	case <-ctx.Done():
		s.m.intents.WithLabelValues("late").Inc()
	}
	return o, nil
}

// makeIntent creates the order's intent at the gateway (its idempotency
// key makes a repeat the same intent) and records it with the hold's
// expiry.
func (s *Service) makeIntent(ctx context.Context, o ledger.Order, holdUntil time.Time) (payment.Intent, error) {
	req := payment.NewIntent{
		AmountMinor: o.AmountMinor,
		Currency:    o.Currency,
		Metadata:    map[string]string{"order_id": o.ID, "reservation_id": o.ReservationID, "sale_id": o.Sale},
		ExpiresAt:   holdUntil,
	}
	if s.opts.ReturnURL != "" {
		sep := "?"
		if strings.Contains(s.opts.ReturnURL, "?") {
			sep = "&"
		}
		req.ReturnURL = s.opts.ReturnURL + sep + "sale=" + url.QueryEscape(o.Sale) + "&order=" + url.QueryEscape(o.ID)
	}
	in, err := s.gateway.CreateIntent(ctx, req, "order-"+o.ID+"-intent")
	if err != nil {
		return payment.Intent{}, fmt.Errorf("create payment intent of order %s: %w", o.ID, err)
	}
	// One write for both: the intent, and the hold's expiry with its grace
	// (so a rebuild of Redis from Postgres keeps the grace).
	if err := s.ledger.SetOrderIntent(ctx, o.ID, in.ID, in.PayURL, holdUntil); err != nil {
		return payment.Intent{}, err
	}
	return in, nil
}

// holdGone confirms that a hold Redis does not show as held is gone. When
// Redis does not know the reservation at all (status ""), Postgres says:
// still held there means Redis lost the sale and is being restored, and the
// caller must try again shortly (sales.ErrRestoring); anything else means
// gone.
func (s *Service) holdGone(ctx context.Context, reservationID string, redisStatus intent.Status) error {
	if redisStatus != "" {
		return nil
	}
	r, err := s.ledger.Reservation(ctx, reservationID)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return nil
	case err != nil:
		return err
	case r.Status == intent.Held:
		return fmt.Errorf("reservation %s: %w", reservationID, sales.ErrRestoring)
	}
	return nil
}

// Order reads an order for its owner, or ErrUnknownOrder. A pending order
// still without its payment intent has it made (as Create does): the
// shopper's page reads the order until the payment link is there, and a
// read after the hold has gone finds the order cancelled.
func (s *Service) Order(ctx context.Context, account, orderID string) (ledger.Order, error) {
	o, err := s.ledger.Order(ctx, orderID)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && o.Account != account) {
		return ledger.Order{}, ErrUnknownOrder
	}
	if err != nil || o.Status != ledger.OrderPendingPayment || (o.IntentID != "" && !o.HoldUntil.IsZero()) {
		return o, err
	}
	// Waiting for its payment to start, or its intent recorded without
	// the hold's end (startPayment records it).
	withIntent, err := s.startPayment(ctx, o)
	switch {
	case err == nil:
		return withIntent, nil
	case errors.Is(err, ErrHoldExpired):
		return s.ledger.Order(ctx, orderID) // cancelled by startPayment, or settled meanwhile
	}
	// The order is as read; its payment is not ready yet, and the next
	// read tries again.
	s.log.Warn("order read: payment not started", "order", o.ID, "err", err)
	return o, nil
}

func hold(o ledger.Order) checkout.Hold {
	return checkout.Hold{ID: o.ReservationID, SKU: o.SKU, Account: o.Account}
}

func priceOf(sale ledger.Sale, sku string) (ledger.SKU, bool) {
	for _, k := range sale.SKUs {
		if k.SKU == sku {
			return k, true
		}
	}
	return ledger.SKU{}, false
}

func newOrderID() (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new order id: %w", err)
	}
	return "o_" + hex.EncodeToString(b[:]), nil
}
