package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/queue"
	"github.com/flashgate/flashgate/tokens"
)

// snapshot: GET /v1/sales/{sale}, from memory, cacheable by the CDN. A
// snapshot older than the bound is not served (it could say "open, 150
// left" of a sale that sold out meanwhile), unless nothing about it can
// change any more: the sale ended, or sold out for good.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx, params []string) error {
	v, err := s.saleView(params[0])
	if err != nil {
		return err
	}
	if !v.longCache && !s.currentAt(v, s.Clock()) {
		return errNotReady
	}
	if v.longCache {
		ctx.Response.Header.Set("Cache-Control", "public, max-age=30, stale-while-revalidate=60")
	} else {
		ctx.Response.Header.Set("Cache-Control", "public, max-age=1, stale-while-revalidate=2")
	}
	ctx.Response.Header.Set("ETag", v.etag)
	if string(ctx.Request.Header.Peek("If-None-Match")) == v.etag {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return nil
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(v.body)
	return nil
}

// queueTokenGrace is how long a queue token outlives its sale.
const queueTokenGrace = time.Hour

// queueAnswer is the body of a join and of a status poll.
type queueAnswer struct {
	State          string `json:"state,omitempty"`
	QueueToken     string `json:"queue_token,omitempty"`
	Position       int64  `json:"position"`
	NowServing     int64  `json:"now_serving"`
	EstimatedWaitS int64  `json:"estimated_wait_s"`
	PollAfterMS    int64  `json:"poll_after_ms"`
	PreQueue       bool   `json:"pre_queue,omitempty"`
	Paused         bool   `json:"paused,omitempty"` // admission is paused by ops
	AdmissionToken string `json:"admission_token,omitempty"`
	Final          *bool  `json:"final,omitempty"`
}

// join: POST /v1/sales/{sale}/queue with a user token.
func (s *Server) join(ctx *fasthttp.RequestCtx, params []string) error {
	account, err := s.Users.Account(bearer(ctx))
	if err != nil {
		return err
	}
	if !validAccount(account) {
		// The origin keys a shopper's Redis state by the account id and
		// takes the same alphabet: refuse now, not after the wait in line.
		return fail(fasthttp.StatusUnauthorized, "invalid_token", "The account id in the user token is not one this sale can serve (1 to 128 printable characters without spaces).")
	}
	if err := s.limit(ctx, byIP(s.Limits.JoinIP, s.clientIP(ctx)), byAccount(s.Limits.JoinAccount, account)); err != nil {
		return err
	}
	v, err := s.saleView(params[0])
	if err != nil {
		return err
	}
	now := s.Clock()
	if !now.Before(v.sale.EndsAt) {
		return errSaleClosed
	}
	if v.sale.SoldOut && v.sale.Final {
		return errSoldOut // for good: true however old the snapshot
	}
	if !s.currentAt(v, now) {
		return errNotReady
	}
	if !s.freshAt(v, now) {
		return pleaseWait
	}
	c, cancel := s.budget()
	defer cancel()
	var place queue.Place
	if held := ctx.Request.Header.Peek("X-Queue-Token"); len(held) > 0 {
		// The shopper shows the place it was given: it keeps it, even
		// when Redis lost the line meanwhile.
		place, err = s.rejoin(c, v, account, string(held))
	} else {
		place, err = s.Line.Join(c, s.Joiner, v.sale.SaleID, v.sale.StartsAt, account)
	}
	if errors.Is(err, queue.ErrWait) || errors.Is(err, queue.ErrLost) {
		// The line stayed at its durable ceiling (the origin is slow or
		// down), or is being put back after Redis lost it: never a place
		// from zero.
		return pleaseWait
	}
	if err != nil {
		return err
	}
	pos := place.Position
	if place.Pre {
		pos = place.Index
	}
	// The token outlives the sale a little, so a shopper still polling at
	// the end hears "closed" rather than "token expired".
	token, _, err := s.Issuer.Queue(v.sale.SaleID, account, pos, place.Pre, v.sale.EndsAt.Add(queueTokenGrace))
	if err != nil {
		return err
	}
	s.metrics.joins.Inc()
	ans := s.waiting(v, place.Pre, pos, now)
	ans.State = ""
	ans.QueueToken = token
	s.setRetryAfter(ctx, &ans)
	writeQueueAnswer(ctx, fasthttp.StatusAccepted, &ans)
	return nil
}

// rejoin answers a join that carries the shopper's queue token: the place
// the token holds, which Redis is told again if it lost it. A token of
// another sale or account is refused like any bad token.
func (s *Server) rejoin(c context.Context, v *view, account, token string) (queue.Place, error) {
	claims, err := s.Tokens.Queue(token, v.sale.SaleID)
	if err != nil {
		return queue.Place{}, err
	}
	if claims.Subject != account {
		return queue.Place{}, fmt.Errorf("queue token of another account: %w", tokens.ErrWrongAccount)
	}
	p := queue.Place{Pre: claims.Pre, Position: claims.Pos}
	if claims.Pre {
		p = queue.Place{Pre: true, Index: claims.Pos}
	}
	return s.Joiner.Claim(c, v.sale.SaleID, account, p)
}

// status: GET /v1/sales/{sale}/queue/status with a queue token. It costs no
// Redis and no origin call: the token carries the place, the view the rest.
func (s *Server) status(ctx *fasthttp.RequestCtx, params []string) error {
	claims, err := s.Tokens.Queue(bearer(ctx), params[0])
	if err != nil {
		return err
	}
	if err := s.sameAccount(ctx, claims.Subject); err != nil {
		return err
	}
	if err := s.limit(ctx, byIP(s.Limits.PollIP, s.clientIP(ctx)), byAccount(s.Limits.PollAccount, claims.Subject)); err != nil {
		return err
	}
	v, err := s.tokenSaleView(params[0])
	if err != nil {
		return err
	}
	now := s.Clock()
	if !now.Before(v.sale.EndsAt) {
		s.metrics.poll("closed").Inc()
		writeQueueAnswer(ctx, fasthttp.StatusOK, &queueAnswer{State: "closed"})
		return nil
	}
	if !s.currentAt(v, now) {
		return errNotReady
	}
	if !s.freshAt(v, now) {
		return pleaseWait
	}
	ans := s.waiting(v, claims.Pre, claims.Pos, now)
	switch {
	case v.sale.SoldOut:
		final := v.sale.Final
		ans.State, ans.Final = "sold_out", &final
		if final {
			ans.PollAfterMS = 0
		}
	case ans.Position > 0 && ans.Position <= v.state.NowServing:
		token, _, err := s.Issuer.Admission(v.sale.SaleID, claims.Subject, ans.Position)
		if err != nil {
			return err
		}
		s.metrics.admitted.Inc()
		ans.State, ans.AdmissionToken, ans.EstimatedWaitS, ans.PollAfterMS = "admitted", token, 0, 1000
	}
	s.metrics.poll(ans.State).Inc()
	s.setRetryAfter(ctx, &ans)
	writeQueueAnswer(ctx, fasthttp.StatusOK, &ans)
	return nil
}

// sameAccount checks, when the request also carries the shopper's user
// token (X-User-Token), that a queue or admission token is theirs.
func (s *Server) sameAccount(ctx *fasthttp.RequestCtx, subject string) error {
	user := ctx.Request.Header.Peek("X-User-Token")
	if len(user) == 0 {
		return nil
	}
	account, err := s.Users.Account(string(user))
	if err != nil {
		return err
	}
	if account != subject {
		return tokens.ErrWrongAccount
	}
	return nil
}

// waiting answers for a shopper not yet admitted: the position (drawn for
// the pre-queue once the sale starts), the wait at the measured admission
// rate, and a poll interval that grows with the distance from the front.
func (s *Server) waiting(v *view, pre bool, pos int64, now time.Time) queueAnswer {
	ans := queueAnswer{State: "waiting", PreQueue: pre, NowServing: v.state.NowServing}
	if pre {
		if !v.drawn {
			// Places are drawn at the start: until then, only the time to
			// it. Come back after the draw, each at its own moment of a
			// window as long as the pre-queue takes to admit (up to 10 s),
			// so the whole pre-queue does not poll in the same second.
			untilStart := max(v.sale.StartsAt.Sub(now), 0)
			ans.EstimatedWaitS = int64(math.Ceil(untilStart.Seconds()))
			ans.PollAfterMS = clampMS(untilStart+spread(pos, preQueueWindow(v)), time.Second, s.opts.MaxPollAfter)
			return ans
		}
		drawn, err := v.shuffle.Position(pos)
		if err != nil {
			drawn = pos // the token names an index the draw does not have: keep it honest
		}
		pos = drawn
	}
	ans.Position = pos
	ahead := pos - v.state.NowServing
	if ahead <= 0 {
		ans.PollAfterMS = min(jitter(1000, pos), s.opts.MaxPollAfter.Milliseconds())
		return ans
	}
	rate := v.state.MeasuredRate
	if rate <= 0 {
		rate = v.state.RatePerSecond
	}
	if v.state.Paused {
		// Paused: the estimate is what the wait will be once admission
		// resumes at the configured rate, and the answer says it is paused.
		rate = v.state.RatePerSecond
		ans.Paused = true
	}
	wait := 30 * time.Second
	if rate > 0 {
		wait = time.Duration(float64(ahead) / rate * float64(time.Second))
	}
	if now.Before(v.sale.StartsAt) {
		wait += v.sale.StartsAt.Sub(now)
	}
	ans.EstimatedWaitS = int64(math.Ceil(wait.Seconds()))
	ans.PollAfterMS = min(jitter(clampMS(wait/4, time.Second, s.opts.MaxPollAfter), pos), s.opts.MaxPollAfter.Milliseconds())
	return ans
}

// preQueueWindow is how long the part of the pre-queue that the stock can
// serve takes to admit at the set rate, between 1 and 10 seconds: the window
// its first polls after the draw are spread over. Shorter than that would
// bring the whole pre-queue back in one instant; longer would let shoppers
// drawn early learn it only after later ones (who polled sooner) had taken
// the units.
func preQueueWindow(v *view) time.Duration {
	served := v.state.PreQueue
	var available int64
	for _, k := range v.sale.SKUs {
		available += max(k.AvailableHint, 0)
	}
	served = min(served, available)
	seconds := 10.0
	if v.state.RatePerSecond > 0 {
		seconds = float64(served) / v.state.RatePerSecond
	}
	return time.Duration(min(max(seconds, 1), 10) * float64(time.Second))
}

// spread places a shopper's index evenly and fixedly in [0, window): the
// same shopper always gets the same moment (a fixed stride through 1,000
// steps, so neighbours in line land far apart).
func spread(index int64, window time.Duration) time.Duration {
	const steps = 1000
	return window * time.Duration(uint64(index)*2654435761%steps) / steps
}

// jitter lengthens a poll interval by up to a quarter, by the shopper's
// place (a fixed stride through 250 steps): shoppers told the same interval
// at the same moment would otherwise all come back in the same instant,
// wave after wave.
func jitter(ms, pos int64) int64 {
	return ms + ms*int64(uint64(pos)*2654435761%250)/1000
}

func clampMS(d, lo, hi time.Duration) int64 {
	return min(max(d, lo), hi).Milliseconds()
}

func (s *Server) setRetryAfter(ctx *fasthttp.RequestCtx, ans *queueAnswer) {
	if ans.State == "waiting" || ans.State == "" {
		var buf [20]byte
		ctx.Response.Header.SetCanonical(headerRetryAfter, strconv.AppendInt(buf[:0], (ans.PollAfterMS+999)/1000, 10))
	}
}
