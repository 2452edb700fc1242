package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/origin/internal/catalog"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/orders"
)

// reservationJSON is a reservation as the contract shows it.
type reservationJSON struct {
	ReservationID string        `json:"reservation_id"`
	SaleID        string        `json:"sale_id"`
	SKU           string        `json:"sku"`
	Status        intent.Status `json:"status"`
	ExpiresAt     time.Time     `json:"expires_at"`
	OrderID       string        `json:"order_id,omitempty"`
}

// reserve: POST /v1/sales/{sale}/reserve with an admission token.
func (s *Server) reserve(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	saleID := params[0]
	claims, err := s.Verifier.Admission(bearer(ctx), saleID)
	if err != nil {
		return err
	}
	if !idPattern.MatchString(saleID) {
		return saleError(errUnknownSale) // never a key or a query
	}
	if !validOpaque(claims.Subject) {
		// Genuine but unusable: such an account could not be stored in
		// the ledger, and its intent would stop the order writer.
		return fail(fasthttp.StatusUnauthorized, "invalid_token", "The token is not valid.")
	}
	var body struct {
		SKU            string `json:"sku"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err := decodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if !idPattern.MatchString(body.SKU) {
		return fail(fasthttp.StatusBadRequest, "invalid_sku", "sku must be 1 to 64 letters, digits, '_' or '-'.")
	}
	if !validOpaque(body.IdempotencyKey) {
		return fail(fasthttp.StatusBadRequest, "invalid_idempotency_key", "idempotency_key must be 1 to 128 printable characters without spaces.")
	}
	sale, err := s.Catalog.Get(c, saleID)
	if err != nil {
		return saleError(err)
	}
	now := s.Clock()
	if now.Before(sale.StartsAt) {
		return fail(fasthttp.StatusConflict, "sale_not_open", "The sale has not started yet.")
	}
	if !now.Before(sale.EndsAt) {
		return fail(fasthttp.StatusConflict, "sale_closed", "The sale is over.")
	}
	res, err := s.Reserver.Reserve(c, checkout.ReserveRequest{
		Sale:           saleID,
		SKU:            body.SKU,
		Account:        claims.Subject,
		TokenID:        claims.ID,
		IdempotencyKey: body.IdempotencyKey,
		HoldTTL:        sale.HoldTTL,
	})
	if errors.Is(err, checkout.ErrNotDurable) {
		// Redis has the hold but the journal (or the replicas) did not
		// confirm it: not promised yet. The same token finds it again.
		s.reserves.WithLabelValues("not_durable").Inc()
		s.Log.Warn("reserve not made durable; answered please_wait", "sale", saleID, "err", err)
		return pleaseWait
	}
	if err != nil {
		return err
	}
	s.reserves.WithLabelValues(res.Outcome.String()).Inc()
	switch res.Outcome {
	case checkout.Created:
		writeJSON(ctx, fasthttp.StatusCreated, reservationJSON{
			ReservationID: res.ReservationID, SaleID: saleID, SKU: body.SKU, Status: intent.Held, ExpiresAt: res.ExpiresAt,
		})
		return nil
	case checkout.Existing:
		if r := res.Reservation; r != nil { // the script read it along
			writeJSON(ctx, fasthttp.StatusOK, reservationJSON{
				ReservationID: r.ID, SaleID: r.Sale, SKU: r.SKU, Status: r.Status, ExpiresAt: r.ExpiresAt, OrderID: r.OrderID,
			})
			return nil
		}
		// Redis no longer holds its hash: ask wherever it stands.
		r, err := s.findReservation(c, res.ReservationID)
		if err != nil {
			return err
		}
		writeJSON(ctx, fasthttp.StatusOK, r)
		return nil
	case checkout.LimitReached:
		return fail(fasthttp.StatusForbidden, "limit_reached", "This account has already bought its limit in this sale.")
	case checkout.Rebuilding:
		return pleaseWait
	case checkout.UnknownSKU:
		if hasSKU(sale, body.SKU) {
			// The sale has it but Redis does not: Redis lost the sale and
			// it is being restored from Postgres.
			return pleaseWait
		}
		return fail(fasthttp.StatusNotFound, "unknown_sku", "This sale has no such SKU.")
	default:
		return fail(fasthttp.StatusConflict, "sold_out", "Sold out.")
	}
}

// reservation: GET /v1/reservations/{id} for its owner.
func (s *Server) reservation(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	account, err := s.Users.Account(bearer(ctx))
	if err != nil {
		return err
	}
	r, owner, err := s.reservationWithOwner(c, params[0])
	if err != nil {
		return err
	}
	if owner != account {
		return errNoReservation // not yours: it does not exist for you
	}
	writeJSON(ctx, fasthttp.StatusOK, r)
	return nil
}

var errNoReservation = fail(fasthttp.StatusNotFound, "unknown_reservation", "There is no such reservation.")

func (s *Server) findReservation(c context.Context, id string) (reservationJSON, error) {
	r, _, err := s.reservationWithOwner(c, id)
	return r, err
}

// reservationWithOwner reads a reservation wherever it stands (Redis while
// live, Postgres after) and says whose it is.
func (s *Server) reservationWithOwner(c context.Context, id string) (reservationJSON, string, error) {
	if saleID, ok := checkout.SaleOfReservation(id); !ok || !idPattern.MatchString(saleID) {
		return reservationJSON{}, "", errNoReservation
	}
	r, err := orders.FindReservation(c, s.Redis, s.Ledger, id)
	if errors.Is(err, orders.ErrNotFound) {
		return reservationJSON{}, "", errNoReservation
	}
	if err != nil {
		return reservationJSON{}, "", err
	}
	return reservationJSON{ReservationID: id, SaleID: r.Sale, SKU: r.SKU, Status: r.Status, ExpiresAt: r.ExpiresAt, OrderID: r.OrderID}, r.Account, nil
}

func saleError(err error) error {
	if errors.Is(err, catalog.ErrUnknownSale) || errors.Is(err, errUnknownSale) {
		return fail(fasthttp.StatusNotFound, "unknown_sale", "There is no such sale.")
	}
	return err
}

func hasSKU(sale ledger.Sale, sku string) bool {
	for _, k := range sale.SKUs {
		if k.SKU == sku {
			return true
		}
	}
	return false
}
