package sales

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// Reservation reads a reservation from Redis, where it is live, or from
// Postgres once Redis has let it go. It fails with ErrUnknownReservation
// when neither knows it (or the id names no sale), and ErrRestoring when
// Redis lost it before Postgres had it and the sale's rebuild has yet to
// put it back from the reserve journal.
func (s *Service) Reservation(ctx context.Context, id string) (intent.Reservation, error) {
	sale, ok := checkout.SaleOfReservation(id)
	if !ok {
		return intent.Reservation{}, ErrUnknownReservation
	}
	r, err := s.checkout.Reservation(ctx, sale, id)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, checkout.ErrNotFound) {
		return intent.Reservation{}, err
	}
	row, err := s.ledger.Reservation(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		journaled, jerr := s.ledger.Journaled(ctx, id)
		if jerr != nil {
			return intent.Reservation{}, jerr
		}
		if journaled {
			return intent.Reservation{}, fmt.Errorf("reservation %s: %w", id, ErrRestoring)
		}
		return intent.Reservation{}, ErrUnknownReservation
	}
	if err != nil {
		return intent.Reservation{}, err
	}
	return row, nil
}

// AccountReservation is Reservation for its owner: another account's
// reservation does not exist for this one (ErrUnknownReservation).
func (s *Service) AccountReservation(ctx context.Context, account, id string) (intent.Reservation, error) {
	r, err := s.Reservation(ctx, id)
	if err != nil {
		return intent.Reservation{}, err
	}
	if r.Account != account {
		return intent.Reservation{}, ErrUnknownReservation
	}
	return r, nil
}
