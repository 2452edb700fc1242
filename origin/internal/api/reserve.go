package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/sales"
	"github.com/flashgate/flashgate/tokens"
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
	claims, err := s.Verifier.Admission(httpapi.Bearer(ctx), saleID)
	if err != nil {
		return err
	}
	if !httpapi.ValidID(saleID) {
		return errUnknownSale // never a key or a query
	}
	if !httpapi.ValidOpaque(claims.Subject) {
		// Genuine but unusable: such an account could not be stored in
		// the ledger, and its intent would stop the order writer.
		return tokens.ErrInvalid
	}
	var body struct {
		SKU            string `json:"sku"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if !httpapi.ValidID(body.SKU) {
		return errInvalidSKU
	}
	if !httpapi.ValidOpaque(body.IdempotencyKey) {
		return errInvalidIdempotencyKey
	}
	sale, err := s.Catalog.Get(c, saleID)
	if err != nil {
		return err
	}
	now := s.Clock()
	if now.Before(sale.StartsAt) {
		return errSaleNotOpen
	}
	if !now.Before(sale.EndsAt) {
		return errSaleClosed
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
		s.Log.Warn("reserve not made durable; answered please_wait", "request_id", httpapi.RequestID(ctx), "sale", saleID, "err", err)
		return httpapi.PleaseWait
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
		return errLimitReached
	case checkout.Rebuilding:
		return httpapi.PleaseWait
	case checkout.UnknownSKU:
		if hasSKU(sale, body.SKU) {
			// The sale has it but Redis does not: Redis lost the sale and
			// it is being restored from Postgres.
			return httpapi.PleaseWait
		}
		return errUnknownSKU
	default:
		return errSoldOut
	}
}

// reservation: GET /v1/reservations/{id} for its owner.
func (s *Server) reservation(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	account, err := s.Users.Account(httpapi.Bearer(ctx))
	if err != nil {
		return err
	}
	if !validReservationID(params[0]) {
		return sales.ErrUnknownReservation // never a key or a query
	}
	r, err := s.Sales.AccountReservation(c, account, params[0])
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, reservationOf(r))
	return nil
}

// findReservation reads a reservation wherever it stands, as the contract
// shows it.
func (s *Server) findReservation(c context.Context, id string) (reservationJSON, error) {
	r, err := s.Sales.Reservation(c, id)
	if err != nil {
		return reservationJSON{}, err
	}
	return reservationOf(r), nil
}

func reservationOf(r intent.Reservation) reservationJSON {
	return reservationJSON{ReservationID: r.ID, SaleID: r.Sale, SKU: r.SKU, Status: r.Status, ExpiresAt: r.ExpiresAt, OrderID: r.OrderID}
}

// validReservationID accepts ids as the reserve answer gives them: printable,
// and naming a sale by a valid id.
func validReservationID(id string) bool {
	sale, ok := checkout.SaleOfReservation(id)
	return ok && httpapi.ValidID(sale) && httpapi.ValidOpaque(id)
}

func hasSKU(sale ledger.Sale, sku string) bool {
	for _, k := range sale.SKUs {
		if k.SKU == sku {
			return true
		}
	}
	return false
}
