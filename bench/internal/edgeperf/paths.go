package edgeperf

import (
	"context"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/loadgen"
)

// status: shoppers of a real line poll with the queue tokens their joins
// earned; the admission cursor has passed PollAdmitted of the line, so the
// answers mix admitted (each with a fresh admission token) and waiting.
func (e *env) status(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "status poll", Request: "GET /v1/sales/" + salePoll + "/queue/status", Expect: fasthttp.StatusOK, Goal: StatusGoal}
	f := newFiller(e.rdb, e.node.Keys, c.FillWorkers)
	pos := make([]int64, c.PollLine)
	_, err := f.join(ctx, salePoll, e.node.StartsAt(salePoll), groupPoll, 0, c.PollLine, func(i int, p int64) { pos[i] = p })
	f.close()
	if err != nil {
		return p, err
	}
	polls, err := build(c.PollLine, func(i int) (loadgen.HTTPRequest, error) {
		tok, _, err := e.issuer.Queue(salePoll, account(groupPoll, i), pos[i], false, e.endsAt)
		if err != nil {
			return loadgen.HTTPRequest{}, err
		}
		user, err := e.users.Issue(account(groupPoll, i)) // the page sends the shopper's user token too
		return loadgen.HTTPRequest{Method: fasthttp.MethodGet, Path: "/v1/sales/" + salePoll + "/queue/status",
			Authorization: []byte("Bearer " + tok), UserToken: []byte(user)}, err
	})
	if err != nil {
		return p, err
	}
	// Place the cursor as if the sale had been admitting for a while; it
	// advances from there at the sale's rate.
	serving := int64(c.PollAdmitted * float64(c.PollLine))
	if err := e.rdb.HSet(ctx, e.node.Keys.Cursor(salePoll), "now_serving", serving).Err(); err != nil {
		return p, fmt.Errorf("place the cursor: %w", err)
	}
	if err := e.node.WaitServing(ctx, salePoll, serving); err != nil {
		return p, err
	}
	reqs := make([]loadgen.HTTPRequest, c.Rounds*(c.Warmup+c.Requests))
	for i := range reqs {
		reqs[i] = polls[i%len(polls)]
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// join: every request a distinct shopper with a user token of the shop's.
func (e *env) join(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "join", Request: "POST /v1/sales/" + saleOpen + "/queue", Expect: fasthttp.StatusAccepted, Goal: JoinGoal}
	reqs, err := build(c.Rounds*(c.Warmup+c.Requests), func(i int) (loadgen.HTTPRequest, error) {
		tok, err := e.users.Issue(account(groupJoin, i))
		return loadgen.HTTPRequest{Method: fasthttp.MethodPost, Path: "/v1/sales/" + saleOpen + "/queue", Authorization: []byte("Bearer " + tok)}, err
	})
	if err != nil {
		return p, err
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// reserves builds reserve requests for sale, each a distinct shopper of
// group with a valid admission token and an idempotency key of its own.
func (e *env) reserves(sale string, group, n int) ([]loadgen.HTTPRequest, error) {
	return build(n, func(i int) (loadgen.HTTPRequest, error) {
		acct := account(group, i)
		tok, _, err := e.issuer.Admission(sale, acct, int64(i+1))
		if err != nil {
			return loadgen.HTTPRequest{}, err
		}
		user, err := e.users.Issue(acct)
		return loadgen.HTTPRequest{
			Method: fasthttp.MethodPost, Path: "/v1/sales/" + sale + "/reserve", Authorization: []byte("Bearer " + tok), UserToken: []byte(user),
			ContentType: "application/json", Body: fmt.Appendf(nil, `{"sku":%q,"idempotency_key":"k-%s"}`, sku, acct),
		}, err
	})
}

// soldOut: valid admission tokens for a sale the node's snapshot says is
// sold out; the edge answers 409 without calling the origin.
func (e *env) soldOut(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "sold-out reserve", Request: "POST /v1/sales/" + saleSoldOut + "/reserve", Expect: fasthttp.StatusConflict, Goal: SoldOutGoal}
	if s, _ := e.node.App.Snapshots.Get(saleSoldOut); !s.SoldOut {
		return p, fmt.Errorf("the node's snapshot of sale %s does not say sold out", saleSoldOut)
	}
	reqs, err := e.reserves(saleSoldOut, groupSoldOut, c.Rounds*(c.Warmup+c.Requests))
	if err != nil {
		return p, err
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// static: the shopper's page, as a client without a cached copy asks.
func (e *env) static(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "static page", Request: "GET /", Expect: fasthttp.StatusOK}
	reqs := make([]loadgen.HTTPRequest, c.Rounds*(c.Warmup+c.Requests))
	for i := range reqs {
		reqs[i] = loadgen.HTTPRequest{Method: fasthttp.MethodGet, Path: "/"}
	}
	return p, e.measurePath(ctx, p, c.Requests, e.pair(reqs))
}

// proxied: admission tokens of a sale with stock; the edge checks each and
// forwards it to the origin, which takes a unit. The origin alone gets
// requests of other shoppers (a token is good for one reserve).
func (e *env) proxied(ctx context.Context) (*Path, error) {
	c := e.c
	p := &Path{Name: "proxied reserve", Request: "POST /v1/sales/" + saleOpen + "/reserve", Expect: fasthttp.StatusCreated}
	n := c.Rounds * (c.Warmup + c.ProxyRequests)
	viaEdge, err := e.reserves(saleOpen, groupProxied, n)
	if err != nil {
		return p, err
	}
	alone, err := e.reserves(saleOpen, groupOrigin, n)
	if err != nil {
		return p, err
	}
	return p, e.measurePath(ctx, p, c.ProxyRequests, []target{
		{server: "bare", client: e.bareClient, addr: e.bare.addr, reqs: viaEdge},
		{server: "origin", client: e.originClient, addr: e.origin.Addr, reqs: alone},
		{server: "edge", client: e.edgeClient, addr: e.node.Addr, reqs: viaEdge},
	})
}
