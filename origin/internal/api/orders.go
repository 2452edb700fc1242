package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/origin/internal/orders"
	"github.com/flashgate/flashgate/origin/internal/payment"
)

// orderJSON is an order as the contract shows it.
type orderJSON struct {
	OrderID       string       `json:"order_id"`
	ReservationID string       `json:"reservation_id"`
	SaleID        string       `json:"sale_id"`
	SKU           string       `json:"sku"`
	Status        string       `json:"status"`
	AmountMinor   int64        `json:"amount_minor"`
	Currency      string       `json:"currency"`
	Payment       *paymentJSON `json:"payment,omitempty"`
	Refund        *refundJSON  `json:"refund,omitempty"`
	CreatedAt     time.Time    `json:"created_at"`
	PaidAt        *time.Time   `json:"paid_at,omitempty"`
}

type paymentJSON struct {
	IntentID string `json:"intent_id"`
	PayURL   string `json:"pay_url"`
}

// refundJSON says where a refunded order's money is: "pending" while the
// gateway has not taken the refund yet, then "issued".
type refundJSON struct {
	Status   string `json:"status"`
	RefundID string `json:"refund_id,omitempty"`
}

func orderView(o ledger.Order) orderJSON {
	v := orderJSON{
		OrderID: o.ID, ReservationID: o.ReservationID, SaleID: o.Sale, SKU: o.SKU, Status: o.Status,
		AmountMinor: o.AmountMinor, Currency: o.Currency, CreatedAt: o.CreatedAt,
	}
	if o.IntentID != "" {
		v.Payment = &paymentJSON{IntentID: o.IntentID, PayURL: o.PayURL}
	}
	switch o.RefundStatus {
	case ledger.RefundOwed:
		v.Refund = &refundJSON{Status: "pending"}
	case ledger.RefundIssued:
		v.Refund = &refundJSON{Status: "issued", RefundID: o.RefundID}
	}
	if !o.PaidAt.IsZero() {
		v.PaidAt = &o.PaidAt
	}
	return v
}

var (
	errNoOrder      = fail(fasthttp.StatusNotFound, "unknown_order", "There is no such order.")
	errHoldExpired  = fail(fasthttp.StatusConflict, "hold_expired", "The hold on this unit has ended; it can no longer be paid for.")
	errNoPayments   = &Error{Status: fasthttp.StatusServiceUnavailable, Code: "please_wait", Message: "Payments are not available right now; please try again in a moment.", RetryAfter: 5}
	errInvalidSig   = fail(fasthttp.StatusUnauthorized, "invalid_signature", "The Payment-Signature does not verify.")
	errStaleSig     = fail(fasthttp.StatusUnauthorized, "stale_signature", "The Payment-Signature's time is outside the tolerance.")
	errInvalidEvent = fail(fasthttp.StatusBadRequest, "invalid_event", "The body is not a payment event.")
	errInvalidResID = fail(fasthttp.StatusBadRequest, "invalid_reservation_id", "reservation_id must be a reservation id as the reserve answer gave it.")
)

// maxWebhookBodySize caps a webhook body; an event is a few KiB.
const maxWebhookBodySize = 64 << 10

// createOrder: POST /v1/orders {reservation_id, idempotency_key} for the
// reservation's owner.
func (s *Server) createOrder(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	account, err := s.Users.Account(bearer(ctx))
	if err != nil {
		return err
	}
	var body struct {
		ReservationID  string `json:"reservation_id"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err := decodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if sale, ok := checkout.SaleOfReservation(body.ReservationID); !ok || !idPattern.MatchString(sale) || !validOpaque(body.ReservationID) {
		return errInvalidResID // never a key or a query
	}
	if !validOpaque(body.IdempotencyKey) {
		return fail(fasthttp.StatusBadRequest, "invalid_idempotency_key", "idempotency_key must be 1 to 128 printable characters without spaces.")
	}
	if s.Orders == nil {
		return errNoPayments
	}
	o, created, err := s.Orders.Create(c, account, body.ReservationID, body.IdempotencyKey)
	switch {
	case errors.Is(err, orders.ErrNotFound):
		return errNoReservation
	case errors.Is(err, orders.ErrHoldExpired):
		return errHoldExpired
	case errors.Is(err, orders.ErrTryAgain), errors.Is(err, checkout.ErrRebuildInProgress):
		return pleaseWait
	case err != nil:
		return err
	}
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
	}
	writeJSON(ctx, status, orderView(o))
	return nil
}

// order: GET /v1/orders/{id} for its owner.
func (s *Server) order(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	account, err := s.Users.Account(bearer(ctx))
	if err != nil {
		return err
	}
	if !validOpaque(params[0]) || s.Orders == nil {
		return errNoOrder
	}
	o, err := s.Orders.Order(c, account, params[0])
	if errors.Is(err, orders.ErrNotFound) {
		return errNoOrder
	}
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, orderView(o))
	return nil
}

// paymentWebhook: POST /v1/payments/webhook from the gateway, signed.
func (s *Server) paymentWebhook(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	if s.Orders == nil {
		return errNoPayments
	}
	body := ctx.PostBody()
	if len(body) > maxWebhookBodySize {
		return bodyTooLarge
	}
	result, err := s.Orders.HandleWebhook(c, string(ctx.Request.Header.Peek("Payment-Signature")), body)
	switch {
	case errors.Is(err, payment.ErrBadSignature):
		return errInvalidSig
	case errors.Is(err, payment.ErrStaleSignature):
		return errStaleSig
	case errors.Is(err, payment.ErrBadEvent):
		return errInvalidEvent
	case errors.Is(err, orders.ErrTryAgain), errors.Is(err, checkout.ErrRebuildInProgress):
		return pleaseWait // the gateway delivers it again
	case err != nil:
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"received": true, "result": result})
	return nil
}
