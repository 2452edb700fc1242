package checkout

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

var (
	//go:embed extend.lua
	extendSource string
	//go:embed pay.lua
	paySource string
	//go:embed payfail.lua
	payFailSource string

	extendScript  = redis.NewScript(extendSource)
	payScript     = redis.NewScript(paySource)
	payFailScript = redis.NewScript(payFailSource)
)

// Extension is what ExtendForPayment did.
type Extension struct {
	// Held: the hold is live; ExpiresAt is its (possibly extended) expiry.
	Held      bool
	ExpiresAt time.Time
	// Status is the reservation's status when it is not held: paid,
	// expired (also when due but not yet swept), cancelled, or "" when
	// Redis does not know the reservation.
	Status intent.Status
}

// ExtendForPayment ties a live hold to its order and, the first time only,
// moves its expiry grace later, so a shopper who has started to pay is not
// cut off mid-payment. It fails with ErrRebuildInProgress while the sale is
// rebuilt from Postgres.
func (s *Store) ExtendForPayment(ctx context.Context, sale string, h Hold, orderID string, grace time.Duration) (Extension, error) {
	keys := []string{s.keys.Reservation(sale, h.ID), s.keys.Holds(sale), s.keys.Rebuilding(sale)}
	v, err := extendScript.Run(ctx, s.rdb, keys, h.ID, orderID, grace.Milliseconds()).Slice()
	if err != nil {
		return Extension{}, fmt.Errorf("extend hold %s: %w", h.ID, err)
	}
	if len(v) != 3 {
		return Extension{}, fmt.Errorf("extend hold %s: unexpected reply %v", h.ID, v)
	}
	code, _ := v[0].(int64)
	expires, _ := v[1].(int64)
	status, _ := v[2].(string)
	switch code {
	case codeRebuilding:
		return Extension{}, fmt.Errorf("extend hold %s: sale %s: %w", h.ID, sale, ErrRebuildInProgress)
	case extendNotHeld:
		return Extension{Status: intent.Status(status)}, nil
	case extendNow, extendBefore:
		return Extension{Held: true, ExpiresAt: time.UnixMilli(expires).UTC(), Status: intent.Held}, nil
	}
	return Extension{}, fmt.Errorf("extend hold %s: unexpected reply %v", h.ID, v)
}

// PayOutcome is what a successful payment did to its hold.
type PayOutcome int

const (
	// PaidNow: the held unit became sold by this call.
	PaidNow PayOutcome = iota + 1
	// PaidBefore: an earlier call (a duplicate webhook) sold it.
	PaidBefore
	// HoldGone: the hold had expired or been cancelled before the money
	// came; nothing was sold and the payment must be refunded.
	HoldGone
	// HoldUnknown: Redis does not know the reservation (it lost the sale,
	// or the reservation is past retention); Postgres must say.
	HoldUnknown
)

// Pay turns a paid-for hold into a sale, exactly once. It fails with
// ErrRebuildInProgress while the sale is rebuilt from Postgres.
func (s *Store) Pay(ctx context.Context, sale string, h Hold, orderID string) (PayOutcome, error) {
	n, err := payScript.Run(ctx, s.rdb, s.paymentKeys(sale, h), h.ID, orderID).Int64()
	if err != nil {
		return 0, fmt.Errorf("pay hold %s: %w", h.ID, err)
	}
	switch n {
	case payNow:
		return PaidNow, nil
	case payBefore:
		return PaidBefore, nil
	case payNotHeld:
		return HoldGone, nil
	case codeRebuilding:
		return 0, fmt.Errorf("pay hold %s: sale %s: %w", h.ID, sale, ErrRebuildInProgress)
	case payUnknown:
		return HoldUnknown, nil
	}
	return 0, fmt.Errorf("pay hold %s: unexpected reply %d", h.ID, n)
}

// PaymentFailed releases a hold whose payment failed, at once, returning
// its unit; it reports whether this call released it. It fails with
// ErrRebuildInProgress while the sale is rebuilt from Postgres.
func (s *Store) PaymentFailed(ctx context.Context, sale string, h Hold) (bool, error) {
	n, err := payFailScript.Run(ctx, s.rdb, s.paymentKeys(sale, h), h.ID).Int64()
	if err != nil {
		return false, fmt.Errorf("release hold %s after a failed payment: %w", h.ID, err)
	}
	if n == codeRebuilding {
		return false, fmt.Errorf("release hold %s after a failed payment: sale %s: %w", h.ID, sale, ErrRebuildInProgress)
	}
	return n == payFailReleased, nil
}

func (s *Store) paymentKeys(sale string, h Hold) []string {
	return []string{
		s.keys.Reservation(sale, h.ID), s.keys.Inventory(sale, h.SKU), s.keys.Account(sale, h.Account),
		s.keys.Holds(sale), s.keys.Intents(sale), s.keys.Rebuilding(sale),
	}
}
