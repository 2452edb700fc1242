package sales

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Why Reserve took no unit; the API answers each with its own code.
var (
	// ErrSaleNotOpen: the sale has not started.
	ErrSaleNotOpen = errors.New("sales: the sale has not started")
	// ErrSaleClosed: the sale is over.
	ErrSaleClosed = errors.New("sales: the sale is over")
	// ErrUnknownSKU: the sale has no such SKU.
	ErrUnknownSKU = errors.New("sales: the sale has no such sku")
	// ErrSoldOut: no unit of the SKU is available.
	ErrSoldOut = errors.New("sales: sold out")
	// ErrLimitReached: the account already bought its unit in the sale.
	ErrLimitReached = errors.New("sales: the account already bought its limit")
	// ErrHoldLimitReached: the account has let Options.MaxHoldsPerAccount
	// holds run out (or be cancelled) in the sale and may take no more.
	ErrHoldLimitReached = errors.New("sales: the account has taken as many holds as it may")
)

// ReserveRequest asks for one unit of a sale's SKU for the account an
// admission token was issued to.
type ReserveRequest struct {
	Sale, SKU, Account string
	TokenID            string // the admission token's jti, burned by the reserve
	IdempotencyKey     string
}

// Reserved is a reserve's reservation. Created is false for a repeat: the
// same token, the same idempotency key, or the account's live hold.
type Reserved struct {
	Reservation intent.Reservation
	Created     bool
}

// Reserve takes one unit for the account, within the sale's window and its
// limits, and counts the outcome. Besides the errors above it fails with
// catalog.ErrUnknownSale, ErrRestoring while Redis has lost the sale (or is
// being rebuilt), and checkout.ErrNotDurable when Redis granted the hold but
// it could not be made durable: the same token and key find it again.
func (s *Service) Reserve(ctx context.Context, req ReserveRequest) (Reserved, error) {
	sale, err := s.catalog.Get(ctx, req.Sale)
	if err != nil {
		return Reserved{}, err
	}
	now := s.opts.Clock.Now()
	if now.Before(sale.StartsAt) {
		return Reserved{}, ErrSaleNotOpen
	}
	if !now.Before(sale.EndsAt) {
		return Reserved{}, ErrSaleClosed
	}
	res, err := s.reserver.Reserve(ctx, checkout.ReserveRequest{
		Sale: req.Sale, SKU: req.SKU, Account: req.Account, TokenID: req.TokenID, IdempotencyKey: req.IdempotencyKey,
		HoldTTL: sale.HoldTTL, MaxHolds: s.opts.MaxHoldsPerAccount,
	})
	if errors.Is(err, checkout.ErrNotDurable) {
		s.m.reserves.WithLabelValues("not_durable").Inc()
		return Reserved{}, err
	}
	if err != nil {
		return Reserved{}, err
	}
	s.m.reserves.WithLabelValues(res.Outcome.String()).Inc()
	switch res.Outcome {
	case checkout.Created:
		return Reserved{Created: true, Reservation: intent.Reservation{
			ID: res.ReservationID, Sale: req.Sale, Account: req.Account, SKU: req.SKU, Status: intent.Held,
			IdempotencyKey: req.IdempotencyKey, ExpiresAt: res.ExpiresAt,
		}}, nil
	case checkout.Existing:
		if r := res.Reservation; r != nil { // the script read it along
			return Reserved{Reservation: *r}, nil
		}
		// Redis no longer holds its hash: ask wherever it stands.
		r, err := s.Reservation(ctx, res.ReservationID)
		return Reserved{Reservation: r}, err
	case checkout.LimitReached:
		return Reserved{}, ErrLimitReached
	case checkout.HoldLimitReached:
		return Reserved{}, ErrHoldLimitReached
	case checkout.Rebuilding:
		return Reserved{}, fmt.Errorf("reserve in sale %s: %w", req.Sale, ErrRestoring)
	case checkout.UnknownSKU:
		if hasSKU(sale, req.SKU) {
			// The sale has it but Redis does not: Redis lost the sale and
			// it is being restored from Postgres.
			return Reserved{}, fmt.Errorf("reserve in sale %s: sku %s not in redis: %w", req.Sale, req.SKU, ErrRestoring)
		}
		return Reserved{}, ErrUnknownSKU
	case checkout.SoldOut:
		return Reserved{}, ErrSoldOut
	}
	return Reserved{}, fmt.Errorf("reserve in sale %s: unexpected outcome %v", req.Sale, res.Outcome)
}

func hasSKU(sale ledger.Sale, sku string) bool {
	for _, k := range sale.SKUs {
		if k.SKU == sku {
			return true
		}
	}
	return false
}
