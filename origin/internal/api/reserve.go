package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/intent"
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
	r, err := s.Sales.Reserve(c, sales.ReserveRequest{
		Sale: saleID, SKU: body.SKU, Account: claims.Subject, TokenID: claims.ID, IdempotencyKey: body.IdempotencyKey,
	})
	if errors.Is(err, checkout.ErrNotDurable) {
		// Redis has the hold but the journal (or the replicas) did not
		// confirm it: not promised yet (errorTable answers please_wait).
		s.Log.Warn("reserve not made durable; answered please_wait", "request_id", httpapi.RequestID(ctx), "sale", saleID, "err", err)
	}
	if err != nil {
		return err
	}
	status := fasthttp.StatusOK
	if r.Created {
		status = fasthttp.StatusCreated
	}
	writeJSON(ctx, status, reservationOf(r.Reservation))
	return nil
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

func reservationOf(r intent.Reservation) reservationJSON {
	return reservationJSON{ReservationID: r.ID, SaleID: r.Sale, SKU: r.SKU, Status: r.Status, ExpiresAt: r.ExpiresAt, OrderID: r.OrderID}
}

// validReservationID accepts ids as the reserve answer gives them: printable,
// and naming a sale by a valid id.
func validReservationID(id string) bool {
	sale, ok := checkout.SaleOfReservation(id)
	return ok && httpapi.ValidID(sale) && httpapi.ValidOpaque(id)
}
