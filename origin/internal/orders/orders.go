// Package orders turns a hold into a paid order exactly once. It creates
// the order and its payment intent at the gateway, extends the hold once so
// a slow payer is not cut off, settles the gateway's webhooks (paid: the
// hold is sold; failed: the unit returns at once; paid too late: the money
// goes back), and reconciles the gateway's records with ours.
//
// Redis decides what happens to a unit (the pay and release scripts, one
// atomic step each); Postgres records what happened to the order, under a
// row lock and together with the event's id, so a webhook delivered five
// times changes one order once.
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

	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/payment"
	"github.com/flashgate/flashgate/origin/internal/sales"
)

// Gateway is the payment gateway as orders use it.
type Gateway interface {
	CreateIntent(ctx context.Context, req payment.NewIntent, idempotencyKey string) (payment.Intent, error)
	Refund(ctx context.Context, intentID string, amountMinor int64, idempotencyKey string) (payment.Refund, error)
	Intents(ctx context.Context, since time.Time) ([]payment.Intent, error)
}

var _ Gateway = (*payment.Client)(nil)

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
	// WebhookSecrets verify the gateway's signatures; any one may match
	// (rotation). Required for webhooks to be accepted.
	WebhookSecrets [][]byte
	// Tolerance is how old (or how far ahead) a signed time may be; 0
	// means 5 minutes.
	Tolerance time.Duration
	// ReconcileEvery is how often Run reconciles; 0 means Run returns at
	// once (another origin reconciles). From app.Config.ReconcileInterval.
	ReconcileEvery time.Duration
	// ReconcileWindow is how far back the gateway's intents are compared;
	// 0 means 48 hours.
	ReconcileWindow time.Duration
	// Clock is the service's time (signature tolerance, paid_at); nil
	// means time.Now.
	Clock func() time.Time
}

// Service is the order and payment flow. It is safe for concurrent use.
type Service struct {
	checkout     *checkout.Store
	ledger       *ledger.Store
	catalog      *catalog.Catalog
	reservations Reservations
	gateway      Gateway
	opts         Options
	log          *slog.Logger
	m            metrics
}

// New returns a Service; Run starts its reconciler.
func New(cs *checkout.Store, ls *ledger.Store, cat *catalog.Catalog, rs Reservations, gw Gateway, opts Options, log *slog.Logger, reg prometheus.Registerer) *Service {
	if opts.Tolerance <= 0 {
		opts.Tolerance = payment.DefaultTolerance
	}
	if opts.ReconcileWindow <= 0 {
		opts.ReconcileWindow = 48 * time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Service{checkout: cs, ledger: ls, catalog: cat, reservations: rs, gateway: gw, opts: opts, log: log, m: newMetrics(reg)}
}

// Create makes the order of a held reservation and its payment intent, or
// returns the order the reservation already has (created = false) — a
// double click makes one order and one intent. It fails with
// sales.ErrUnknownReservation when the reservation is not the account's,
// and ErrHoldExpired when its hold is gone (unless its order is paid).
func (s *Service) Create(ctx context.Context, account, reservationID, idempotencyKey string) (_ ledger.Order, created bool, err error) {
	res, err := s.reservations.AccountReservation(ctx, account, reservationID)
	if err != nil {
		return ledger.Order{}, false, err
	}
	o, err := s.ledger.OrderOfReservation(ctx, reservationID)
	switch {
	case err == nil:
		o, err = s.existing(ctx, o)
		return o, false, err
	case !errors.Is(err, ledger.ErrNotFound):
		return ledger.Order{}, false, err
	}
	if res.Status != intent.Held {
		return ledger.Order{}, false, ErrHoldExpired
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
	o, created, err = s.ledger.CreateOrder(ctx, ledger.Order{
		ID: id, ReservationID: reservationID, Sale: res.Sale, SKU: res.SKU, Account: account,
		AmountMinor: price.PriceMinor, Currency: price.Currency, IdempotencyKey: idempotencyKey,
	})
	if err != nil {
		return ledger.Order{}, false, err
	}
	if created {
		s.m.ordersCreated.Inc()
	}
	o, err = s.startPayment(ctx, o)
	return o, created, err
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
	req := payment.NewIntent{
		AmountMinor: o.AmountMinor,
		Currency:    o.Currency,
		Metadata:    map[string]string{"order_id": o.ID, "reservation_id": o.ReservationID, "sale_id": o.Sale},
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
		return ledger.Order{}, fmt.Errorf("create payment intent of order %s: %w", o.ID, err)
	}
	// One write for both: the intent, and the hold's expiry with its grace
	// (so a rebuild of Redis from Postgres keeps the grace).
	if err := s.ledger.SetOrderIntent(ctx, o.ID, in.ID, in.PayURL, ext.ExpiresAt); err != nil {
		return ledger.Order{}, err
	}
	o.IntentID, o.PayURL = in.ID, in.PayURL
	return o, nil
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

// Order reads an order for its owner, or ErrUnknownOrder.
func (s *Service) Order(ctx context.Context, account, orderID string) (ledger.Order, error) {
	o, err := s.ledger.Order(ctx, orderID)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && o.Account != account) {
		return ledger.Order{}, ErrUnknownOrder
	}
	return o, err
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
