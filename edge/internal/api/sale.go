package api

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/tokens"
)

// snapshot: GET /v1/sales/{sale}, from memory, cacheable by the CDN. A
// snapshot older than the bound is not served (it could say "open, 150
// left" of a sale that sold out meanwhile), unless nothing about it can
// change any more: the sale ended, or sold out for good.
//
// With ?at=<unix second> it is a watch (docs/API.md): the answer waits at
// the edge until that second ends or the sale has news — sold out, sold
// out for good, a new status — whichever comes first, so a page that reads
// the snapshot once a second hears the news as it happens, not up to a
// second later. Every page asks for the same second, so a CDN collapses
// them into one request a second, and keeps the answer for that second.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx, params []string) error {
	at, watch, err := watchSecond(ctx)
	if err != nil {
		return err
	}
	v, err := s.currentView(params[0])
	if err != nil {
		return err
	}
	now := s.Clock.Now()
	cache, next := snapshotShortCache, now.Unix()+1
	switch {
	case v.LongCache:
		cache = snapshotLongCache
	case watch && at > now.Unix()+1:
		// A page whose clock is ahead: answered at once and told the
		// edge's second to ask for, but kept nowhere — kept, it would
		// be served for that second when it comes, unheld.
		cache = snapshotNoStore
	case watch && at >= now.Unix()-1:
		// (A second further back is a page whose clock is behind:
		// answered at once like a plain read.)
		if v, cache, err = s.watchSnapshot(params[0], at); err != nil {
			return err
		}
		next = at + 1
	}
	ctx.Response.Header.Set(headerNextAt, strconv.FormatInt(next, 10))
	writeSnapshot(ctx, v.Body, v.ETag, cache)
	return nil
}

// currentView is the sale's view while it is current enough to answer
// from (or can no longer change), else admission.ErrNotReady.
func (s *Server) currentView(sale string) (*admission.View, error) {
	v, err := s.Admission.View(sale)
	if err != nil {
		return nil, err
	}
	if !v.LongCache && !v.Current(s.Clock.Now()) {
		return nil, admission.ErrNotReady
	}
	return v, nil
}

// watchSnapshot holds a watch of second at (within one of the edge's)
// until that second ends or the sale has news, and returns the view to
// answer with and how it may be kept. News since the second before at
// began is answered at once: the page's last answer, made as that second
// ended, may not have had it.
func (s *Server) watchSnapshot(sale string, at int64) (*admission.View, []byte, error) {
	// The channel before the view again: news that comes between the two
	// wakes the wait rather than being missed.
	news, lastNews := s.Admission.News(sale)
	v, err := s.currentView(sale)
	if err != nil {
		return nil, nil, err
	}
	now := s.Clock.Now()
	start, end := time.Unix(at, 0), time.Unix(at+1, 0)
	switch {
	case !lastNews.Before(start.Add(-time.Second)) || !now.Before(end):
		return v, snapshotWatchCache, nil
	case !s.holdSnapshot():
		// Every hold taken: the answer is not the second's, and kept,
		// it would be served for the rest of the second unheld.
		return v, snapshotNoStore, nil
	}
	s.waitSnapshot(news, end.Sub(now))
	if v, err = s.currentView(sale); err != nil {
		return nil, nil, err
	}
	return v, snapshotWatchCache, nil
}

// watchSecond reads a snapshot request's ?at=<unix second>: watch is false
// without one.
func watchSecond(ctx *fasthttp.RequestCtx) (at int64, watch bool, err error) {
	raw := ctx.QueryArgs().Peek("at")
	if raw == nil {
		return 0, false, nil
	}
	at, perr := strconv.ParseInt(string(raw), 10, 64)
	if perr != nil || at < 0 {
		return 0, false, errWatchSecond
	}
	return at, true, nil
}

// holdSnapshot takes one of the node's places for a held snapshot, which
// waitSnapshot gives back; false when all are taken (a crowd that reaches
// the edge without a CDN in between), and the answer goes at once.
func (s *Server) holdSnapshot() bool {
	if s.held.Add(1) > int64(s.opts.MaxHeldSnapshots) {
		s.held.Add(-1)
		s.metrics.snapshotsNotHeld.Inc()
		return false
	}
	return true
}

// waitSnapshot waits for the sale's news or for d, and gives the held
// snapshot's place back.
func (s *Server) waitSnapshot(news <-chan struct{}, d time.Duration) {
	defer s.held.Add(-1)
	t := s.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-news:
	case <-t.C:
	}
}

// writeSnapshot answers a sale's snapshot, body (JSON) with its etag and
// the given Cache-Control; 304 when the request holds that etag already.
// Like every JSON answer, it is not to be sniffed as anything else.
func writeSnapshot(ctx *fasthttp.RequestCtx, body []byte, etag string, cache []byte) {
	h := &ctx.Response.Header
	h.SetCanonical(httpapi.HeaderCacheControl, cache)
	h.Set("ETag", etag)
	h.SetCanonical(httpapi.HeaderContentTypeOptions, noSniff)
	if string(ctx.Request.Header.Peek("If-None-Match")) == etag {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// The snapshot's header values, made once. A watch's answer is the answer
// for its second, kept for the second it names and no longer; one made
// before its second or without its hold is kept nowhere.
var (
	snapshotLongCache  = []byte("public, max-age=30, stale-while-revalidate=60")
	snapshotShortCache = []byte("public, max-age=1, stale-while-revalidate=2")
	snapshotWatchCache = []byte("public, max-age=2")
	snapshotNoStore    = []byte("no-store")
	noSniff            = []byte("nosniff")
)

// headerNextAt names the second a page's next watch asks for.
const headerNextAt = "Flashgate-Next-At"

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
	account, signals, err := s.shopper(httpapi.Bearer(ctx))
	if err != nil {
		return err
	}
	if !httpapi.ValidOpaque(account) {
		return errAccountID
	}
	client, named := s.clientAddr(ctx)
	address := addressKey(client)
	if err := s.limit(ctx, byAccount(LimitJoinAccount, s.Limits.JoinAccount, account),
		byIP(LimitJoinIP, s.Limits.JoinIP, address), bySubnet(LimitJoinSubnet, s.networkLimits().join, client)); err != nil {
		return err
	}
	v, err := s.Admission.View(params[0])
	if err != nil {
		return err
	}
	now := s.Clock.Now()
	if err := v.Joinable(now); err != nil {
		return err
	}
	if answered, err := s.challenged(ctx, v, account, signals); answered || err != nil {
		return err
	}
	c, cancel := s.budget()
	defer cancel()
	var place line.Place
	if held := ctx.Request.Header.Peek("X-Queue-Token"); len(held) > 0 {
		// The shopper shows the place it was given: it keeps it, even
		// when Redis lost the line meanwhile.
		place, err = s.rejoin(c, v, account, string(held))
	} else {
		place, err = s.Line.Join(c, v.Sale.SaleID, v.Sale.StartsAt, account)
	}
	if err != nil {
		return err
	}
	if s.Defences != nil {
		if named {
			s.Defences.Joined(v.Sale.SaleID, account, address, client)
		}
	}
	pos := place.Position
	if place.Pre {
		pos = place.Index
	}
	// The token outlives the sale a little, so a shopper still polling at
	// the end hears "closed" rather than "token expired".
	token, _, err := s.Issuer.Queue(v.Sale.SaleID, account, pos, place.Pre, v.Sale.EndsAt.Add(queueTokenGrace))
	if err != nil {
		return err
	}
	s.metrics.joins.Inc()
	ans := waiting(v.Estimate(place.Pre, pos, now))
	ans.State = ""
	ans.QueueToken = token
	s.setRetryAfter(ctx, &ans)
	writeQueueAnswer(ctx, fasthttp.StatusAccepted, &ans)
	return nil
}

// shopper verifies a join's user token and returns its account, with the
// shop's signals when a trust rule could ask more of the account (only
// then are the token's claims read a second time).
func (s *Server) shopper(token string) (string, tokens.Signals, error) {
	if s.Defences != nil && s.Defences.Settings().Trust.Active() {
		return s.Users.Shopper(token)
	}
	account, err := s.Users.Account(token)
	return account, tokens.Signals{}, err
}

// rejoin answers a join that carries the shopper's queue token: the place
// the token holds, which Redis is told again if it lost it. A token of
// another sale or account is refused like any bad token.
func (s *Server) rejoin(c context.Context, v *admission.View, account, token string) (line.Place, error) {
	claims, err := s.Tokens.Queue(token, v.Sale.SaleID)
	if err != nil {
		return line.Place{}, err
	}
	if claims.Subject != account {
		return line.Place{}, fmt.Errorf("queue token of another account: %w", tokens.ErrWrongAccount)
	}
	return s.Line.Claim(c, v.Sale.SaleID, account, placeOf(claims))
}

// placeOf is the place a queue token carries.
func placeOf(claims tokens.QueueClaims) line.Place {
	if claims.Pre {
		return line.Place{Pre: true, Index: claims.Pos}
	}
	return line.Place{Position: claims.Pos}
}

// restoreSkew is how far the edges' clocks (a queue token's iat) and
// Redis's (a restore's time) may disagree.
const restoreSkew = 5 * time.Second

// stillHeld is nil when the account still holds the place its queue token
// carries. Within one line in Redis it always does (a join gives an
// account the place it has). After Redis lost the line, an account that
// joined again without its token holds a new place too, and two tokens
// would let it take whichever is admitted first — two draws of the
// pre-queue's lottery: so a token issued before the line's last restore
// claims its place as a rejoin showing it would (Keeper.Claim), and is
// refused when the account holds another (errSuperseded). Only such
// tokens, and only at admission, cost a Redis call.
func (s *Server) stillHeld(v *admission.View, claims tokens.QueueClaims) error {
	restored := v.State.RestoredAt
	if !v.HasState || restored.IsZero() || claims.IssuedAt == nil || claims.IssuedAt.After(restored.Add(restoreSkew)) {
		return nil
	}
	c, cancel := s.budget()
	defer cancel()
	want := placeOf(claims)
	have, err := s.Line.Claim(c, v.Sale.SaleID, claims.Subject, want)
	if err != nil {
		return err
	}
	if have != want {
		return errSuperseded
	}
	return nil
}

// status: GET /v1/sales/{sale}/queue/status with a queue token and the
// same account's user token. It costs no Redis and no origin call — the
// token carries the place, the view the rest — but for the admission of a
// token from before Redis lost the line (stillHeld).
func (s *Server) status(ctx *fasthttp.RequestCtx, params []string) error {
	claims, err := s.Tokens.Queue(httpapi.Bearer(ctx), params[0])
	if err != nil {
		return err
	}
	if err := s.sameAccount(ctx, claims.Subject); err != nil {
		return err
	}
	client, _ := s.clientAddr(ctx)
	if err := s.limit(ctx, byAccount(LimitPollAccount, s.Limits.PollAccount, claims.Subject),
		byIP(LimitPollIP, s.Limits.PollIP, addressKey(client)), bySubnet(LimitPollSubnet, s.networkLimits().poll, client)); err != nil {
		return err
	}
	v, err := s.Admission.TokenView(params[0])
	if err != nil {
		return err
	}
	now := s.Clock.Now()
	if !now.Before(v.Sale.EndsAt) {
		s.metrics.poll("closed").Inc()
		writeQueueAnswer(ctx, fasthttp.StatusOK, &queueAnswer{State: "closed"})
		return nil
	}
	if err := v.Ready(now); err != nil {
		return err
	}
	est := v.Estimate(claims.Pre, claims.Pos, now)
	ans := waiting(est)
	switch {
	case v.Sale.SoldOut:
		final := v.Sale.Final
		ans.State, ans.Final = "sold_out", &final
		if final {
			ans.PollAfterMS = 0
		}
	case est.Admitted && s.Defences != nil && s.Defences.Tarpitted(claims.Subject):
		ans = waiting(tarpitted(est))
	case est.Admitted:
		if err := s.stillHeld(v, claims); err != nil {
			return err
		}
		token, _, err := s.Issuer.Admission(v.Sale.SaleID, claims.Subject, est.Position)
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

// sameAccount checks that the request carries the shopper's user token
// (X-User-Token) and that a queue or admission token is theirs: a queue or
// admission token that leaked (a shared screenshot, a log line) is not
// enough without the account's own sign-in.
func (s *Server) sameAccount(ctx *fasthttp.RequestCtx, subject string) error {
	user := ctx.Request.Header.Peek("X-User-Token")
	if len(user) == 0 {
		return errNoUserToken
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

// tarpitted is the estimate a tarpitted shopper whose place has come is
// shown: next in line, a moment's wait, the pace it was told before — an
// answer of the usual shape, not a refusal that names the rule broken. A
// script that compares it with the snapshot's now_serving can tell it is
// held (docs/FAIRNESS.md, "The tarpit"): the tarpit delays, it does not
// deceive.
func tarpitted(e admission.Estimate) admission.Estimate {
	e.Admitted = false
	e.NowServing = min(e.NowServing, max(e.Position-1, 0))
	e.WaitS = 1
	e.PollAfterMS = max(e.PollAfterMS, 1000)
	return e
}

// waiting is the answer to a shopper not yet admitted, from the estimate.
func waiting(e admission.Estimate) queueAnswer {
	return queueAnswer{State: "waiting", Position: e.Position, NowServing: e.NowServing,
		EstimatedWaitS: e.WaitS, PollAfterMS: e.PollAfterMS, PreQueue: e.PreQueue, Paused: e.Paused}
}

func (s *Server) setRetryAfter(ctx *fasthttp.RequestCtx, ans *queueAnswer) {
	if ans.State == "waiting" || ans.State == "" {
		var buf [20]byte
		ctx.Response.Header.SetCanonical(httpapi.HeaderRetryAfter, strconv.AppendInt(buf[:0], (ans.PollAfterMS+999)/1000, 10))
	}
}
