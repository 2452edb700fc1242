package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/ledger"
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
	// PollAfterMS: a pending order whose payment link the gateway has not
	// made yet; read the order again after this long.
	PollAfterMS int64 `json:"poll_after_ms,omitempty"`
}

// paymentPollAfter is how soon to read an order again whose payment intent
// is still being made: the gateway answers in tens of milliseconds when it
// is well, and the page should not hammer it when it is not.
const paymentPollAfter = 500 * time.Millisecond

type paymentJSON struct {
	IntentID string `json:"intent_id"`
	PayURL   string `json:"pay_url"`
}

// refundJSON says where a refunded order's money is: "pending" while the
// gateway has not taken the refund yet (or the one it took failed, and
// another is on its way to it), then "issued", with refunded_at once the
// gateway reports the money back (a bank's refund can take days).
type refundJSON struct {
	Status     string     `json:"status"`
	RefundID   string     `json:"refund_id,omitempty"`
	RefundedAt *time.Time `json:"refunded_at,omitempty"`
}

func orderView(o ledger.Order) orderJSON {
	v := orderJSON{
		OrderID: o.ID, ReservationID: o.ReservationID, SaleID: o.Sale, SKU: o.SKU, Status: o.Status,
		AmountMinor: o.AmountMinor, Currency: o.Currency, CreatedAt: o.CreatedAt,
	}
	switch {
	case o.IntentID != "":
		v.Payment = &paymentJSON{IntentID: o.IntentID, PayURL: o.PayURL}
	case o.Status == ledger.OrderPendingPayment:
		v.PollAfterMS = paymentPollAfter.Milliseconds()
	}
	switch o.RefundStatus {
	case ledger.RefundOwed:
		v.Refund = &refundJSON{Status: "pending"}
	case ledger.RefundIssued:
		v.Refund = &refundJSON{Status: "issued", RefundID: o.RefundID}
		if !o.RefundedAt.IsZero() {
			v.Refund.RefundedAt = &o.RefundedAt
		}
	}
	if !o.PaidAt.IsZero() {
		v.PaidAt = &o.PaidAt
	}
	return v
}

// maxWebhookBodySize caps a webhook body; an event is a few KiB.
const maxWebhookBodySize = 64 << 10

// createOrder: POST /v1/orders {reservation_id, idempotency_key} for the
// reservation's owner.
func (s *Server) createOrder(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	account, err := s.Users.Account(httpapi.Bearer(ctx))
	if err != nil {
		return err
	}
	var body struct {
		ReservationID  string `json:"reservation_id"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if !validReservationID(body.ReservationID) {
		return errInvalidReservationID // never a key or a query
	}
	if !httpapi.ValidOpaque(body.IdempotencyKey) {
		return errInvalidIdempotencyKey
	}
	if s.Orders == nil {
		return errNoPayments
	}
	o, created, err := s.Orders.Create(c, account, body.ReservationID, body.IdempotencyKey)
	if err != nil {
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
	account, err := s.Users.Account(httpapi.Bearer(ctx))
	if err != nil {
		return err
	}
	if !httpapi.ValidOpaque(params[0]) || s.Orders == nil {
		return errUnknownOrder
	}
	o, err := s.Orders.Order(c, account, params[0])
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, orderView(o))
	return nil
}

// paymentWebhook: POST /v1/payments/webhook from the gateway, signed. An
// error answer makes the gateway deliver it again.
func (s *Server) paymentWebhook(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	if s.Orders == nil {
		return errNoPayments
	}
	body := ctx.PostBody()
	if len(body) > maxWebhookBodySize {
		return httpapi.ErrBodyTooLarge
	}
	header := func(name string) string { return string(ctx.Request.Header.Peek(name)) }
	result, err := s.Orders.HandleWebhook(c, header, body)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"received": true, "result": result})
	return nil
}
