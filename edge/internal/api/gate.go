package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/proxy"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// reserve: POST /v1/sales/{sale}/reserve. While the snapshot says sold
// out, the answer is 409 for everyone, token or not — it is public, and
// answering it before any token work keeps the stampede after the last
// unit cheap. While the snapshot is older than the bound the edge cannot
// tell, and answers please_wait (sold out for good stays 409). Otherwise
// the edge checks the admission token and the limits, and only the rest
// reach origin. A sale the edge does not know is 404 only without a valid
// admission token for it: with one, the sale exists and is newer than the
// edge's last list, so the answer is please_wait while the list catches up.
func (s *Server) reserve(ctx *fasthttp.RequestCtx, params []string) error {
	v, err := s.Admission.View(params[0])
	if errors.Is(err, admission.ErrUnknownSale) {
		if _, terr := s.Tokens.Admission(httpapi.Bearer(ctx), params[0]); terr == nil {
			v, err = s.Admission.TokenView(params[0])
		}
	}
	if err != nil {
		return err
	}
	if err := v.Reservable(s.Clock.Now()); err != nil {
		return err
	}
	claims, err := s.Tokens.Admission(httpapi.Bearer(ctx), params[0])
	if err != nil {
		return err
	}
	if err := s.sameAccount(ctx, claims.Subject); err != nil {
		return err
	}
	if err := s.limit(ctx, byAccount(LimitReserveAccount, s.Limits.ReserveAccount, claims.Subject), byIP(LimitReserveIP, s.Limits.ReserveIP, s.addressKey(ctx))); err != nil {
		return err
	}
	if err := s.forward(ctx, s.Origin, "origin"); err != nil {
		return err
	}
	status := ctx.Response.StatusCode()
	if status < fasthttp.StatusInternalServerError {
		s.Admission.Answered(params[0]) // the checkout's pace, for admission's slow start
	}
	if status == fasthttp.StatusConflict && bytes.Contains(ctx.Response.Body(), soldOutCode) && showsUnits(v, ctx.PostBody()) {
		// The origin's count reached zero before this node's snapshot said
		// so: the line hears it at the next tick, not the next refresh.
		s.Admission.Refresh()
	}
	return nil
}

// showsUnits reports whether the view shows units left of the SKU the
// reserve body names (any SKU of the sale when it names none it has).
func showsUnits(v *admission.View, body []byte) bool {
	var req struct {
		SKU string `json:"sku"`
	}
	_ = json.Unmarshal(body, &req) // the origin read it already; a bad body names no SKU
	for _, k := range v.Sale.SKUs {
		if k.SKU == req.SKU {
			return k.AvailableHint > 0
		}
	}
	return v.Sale.Available() > 0
}

// soldOutCode is how the origin's 409 sold_out names itself in its body.
var soldOutCode = []byte(`"error":"sold_out"`)

// userPassThrough is the handler of a route that goes to origin for a
// signed-in shopper (orders, reservations), limited per account by l, the
// limit called name: the edge turns away a missing or bad user token, and
// an account over its limit, itself. Each of these costs the origin Redis
// and Postgres work on a pool it shares with the order writer.
func (s *Server) userPassThrough(name string, l *limiter.Limiter) handler {
	return func(ctx *fasthttp.RequestCtx, _ []string) error {
		account, err := s.Users.Account(httpapi.Bearer(ctx))
		if err != nil {
			return err
		}
		if err := s.limit(ctx, byAccount(name, l, account)); err != nil {
			return err
		}
		return s.forward(ctx, s.Payments, "origin_payments")
	}
}

// webhook: the payment gateway's call goes to origin untouched, which
// checks its signature. The edge only bounds it: the gateway's addresses
// when ops name them, a rate per address and the body's size.
func (s *Server) webhook(ctx *fasthttp.RequestCtx, _ []string) error {
	if !s.webhookAllowed(ctx) {
		return errWebhookAddress
	}
	if err := s.limit(ctx, byIP(LimitWebhookIP, s.Limits.WebhookIP, s.addressKey(ctx))); err != nil {
		return err
	}
	if len(ctx.PostBody()) > s.opts.WebhookMaxBodyBytes {
		return httpapi.ErrBodyTooLarge
	}
	return s.forward(ctx, s.Payments, "origin_payments")
}

// webhookAllowed reports whether the caller's address may send webhooks:
// any address when no allow-list is set, else one inside it.
func (s *Server) webhookAllowed(ctx *fasthttp.RequestCtx) bool {
	if len(s.opts.WebhookAllow) == 0 {
		return true
	}
	a, named := s.clientAddr(ctx)
	if !named {
		return false // a proxy's address, standing in for a client it could not name
	}
	for _, p := range s.opts.WebhookAllow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// shop: every path outside the sale goes to the shop's own upstream, over
// its own pool, so the sale cannot starve the shop.
func (s *Server) shop(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Shop == nil {
		return httpapi.ErrNotFound
	}
	return s.forward(ctx, s.Shop, "shop")
}

// forward proxies the request to upstream u (name is its metrics label). A
// failure is returned for the router to log and answer please_wait.
func (s *Server) forward(ctx *fasthttp.RequestCtx, u *proxy.Upstream, name string) error {
	start := time.Now()
	waited, err := u.Forward(ctx, s.forwarded(ctx))
	s.metrics.originWaitBy.get(name).Observe(waited.Seconds())
	outcome := "ok"
	if err != nil {
		outcome = "error"
		if errors.Is(err, proxy.ErrBusy) {
			outcome = "busy"
		}
	}
	s.metrics.upstream.WithLabelValues(name, outcome).Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("upstream %s: %w", name, err)
	}
	return nil
}

// static: the shopper's page and its assets.
func (s *Server) static(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.Static(ctx)
}

// devLogin: POST /v1/dev/login {"user_id"}, dev mode only.
func (s *Server) devLogin(ctx *fasthttp.RequestCtx, _ []string) error {
	var body struct {
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &body); err != nil || !httpapi.ValidOpaque(body.UserID) {
		return errUserID
	}
	token, err := s.DevUsers.Issue(body.UserID)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, map[string]string{"user_token": token})
	return nil
}
