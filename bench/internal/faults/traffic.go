package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/tokens"
)

// Load is the sale each scenario plays: one place for its defaults.
type Load struct {
	Shoppers int     // shoppers in the sale's crowd
	Stock    int     // units of the sale's one SKU
	RatePerS float64 // the sale's admission rate
	ArrivalS float64 // shoppers arrive evenly over this many seconds after the start
	LifeS    float64 // a shopper gives up this long after arriving
	PayShare float64 // share of shoppers with a hold who pay
	HoldTTLS int     // the sale's hold time
	// PastSales is how many sales that ended earlier today are listed too
	// (the origin lists a sale for 24 h after its end): the edge's snapshot
	// refresh carries them, as it does on a shop that has run sales.
	PastSales int
	// PausedShoppers join, just after the start, a sale ops paused before
	// anyone joined (its rate left at the edges' default), and poll both
	// edges in turn through the fault and after: nobody may be admitted.
	PausedShoppers int
	// SlowShoppers join, just after the start, a sale whose rate ops lowered
	// from the edges' default to SlowRatePerS, more of them than the run
	// admits: admissions may run ahead of that rate by at most
	// earlyBound(SlowRatePerS) per Redis loss (linesales.go).
	SlowShoppers int
	SlowRatePerS float64

	// RequestTimeout is one request's budget: a request not answered by
	// then is a hang.
	RequestTimeout time.Duration
	// ProbeEvery is how often a probe reserves (on the probe sale, with an
	// admission token the harness signs) and joins (its line).
	ProbeEvery time.Duration
	// RecoverWithin is how long after a fault ends the probes go on looking
	// for the stack to work again before the scenario calls it not
	// recovered.
	RecoverWithin time.Duration
	// Seed makes the crowd (who pays, arrival noise) reproducible.
	Seed uint64
}

// DefaultLoad: 200 shoppers for 100 units admitted at 25 a second, so
// reserves run across the fault at 3 s; holds of 5 s, so unpaid units come
// back within the scenario; ten sales that ended earlier today; 30 shoppers
// in a paused line and 40 in a line admitted at 1 a second.
func DefaultLoad() Load {
	return Load{
		Shoppers: 200, Stock: 100, RatePerS: 25, ArrivalS: 8, LifeS: 14, PayShare: 0.7, HoldTTLS: 5, PastSales: 10,
		PausedShoppers: 30, SlowShoppers: 40, SlowRatePerS: 1,
		RequestTimeout: 10 * time.Second, ProbeEvery: 250 * time.Millisecond, RecoverWithin: 20 * time.Second, Seed: 1,
	}
}

// Sale ids and SKUs within a scenario (each scenario has its own Redis and
// database, so the ids repeat across scenarios).
const (
	shopSale   = "chaos-sale" // the crowd's sale
	shopSKU    = "sneaker"
	probeSale  = "chaos-probe" // endless stock: the probes' reserves and joins
	probeSKU   = "probe"
	probeStock = 100_000
	pausedSale = "chaos-paused" // paused by ops before anyone joined: nobody may be admitted
	slowSale   = "chaos-slow"   // lowered by ops to Load.SlowRatePerS from the default
	lineSKU    = "line"
	// edgeDefaultRate is the rate the edges give a sale until ops set one
	// (FLASHGATE_DEFAULT_RATE, set to it in the stack): the paused sale
	// keeps it, the slow sale is lowered from it.
	edgeDefaultRate = 100.0
)

// shopper is one person in the crowd. Only its own goroutine writes it
// until the run ends.
type shopper struct {
	account, ip, userToken string
	arrival                time.Duration // since the start
	payer                  bool
	payDelay               time.Duration

	fate       string // "" (no answer), reserved, sold_out, closed, refused:<code>
	queueToken string
	position   int64 // as the join told
	admitted   bool
	obs        []observation // every status answer
	reservedID string        // from a 201
	orderID    string
	intentID   string
	charged    bool // the gateway's pay answered succeeded
	sawPaid    bool // GET /v1/orders said paid
}

// answered reports whether the shopper heard an honest answer in its
// time: a place in line (the join's 202), a unit, or sold out. A shopper
// still in line when its time ran out was answered: admission may hold
// while the checkout is behind, and "you are in line" is the answer then.
func (sh *shopper) answered() bool { return sh.fate != "" || sh.queueToken != "" }

// outcome is the shopper's fate for the report: "in line" for one that
// held a place and no other fate when its time ran out.
func (sh *shopper) outcome() string {
	switch {
	case sh.fate != "":
		return sh.fate
	case sh.queueToken != "":
		return "in line"
	}
	return "no answer"
}

// observation is one status answer.
type observation struct {
	at         time.Time
	state      string
	position   int64
	nowServing int64
}

// accepted is a 201: a unit the stack promised.
type accepted struct {
	id, account, sale string
	admission         string // the admission token the 201 burned
	sku, ip           string
	at                time.Time
}

// probeCall is one probe's outcome.
type probeCall struct {
	kind       string // reserve or join
	sent, done time.Time
	ok         bool
}

// traffic is one scenario's load on the stack.
type traffic struct {
	load      Load
	st        *stack
	setUpTime time.Duration   // the time setUp has before the sales start (Options.SetUp)
	ctx       context.Context // the run's: every request's (a shopper's life bounds only its waits)
	zero      time.Time       // the sales' start
	rec       *recorder
	c         *client
	users     *tokens.DevUserIssuer
	issuer    *tokens.Issuer

	shoppers []*shopper

	mu          sync.Mutex // guards accepted, charges, probes, keptIntents, stale
	accepted    []accepted
	charges     map[string]string // intent id → order id, for every pay the gateway answered succeeded
	probes      []probeCall
	keptIntents map[string]gatewayIntent // listed before the gateway was killed
	stale       time.Duration            // the longest the edge's snapshot disagreed with the origin's on sold-out

	lines *lineTraffic // the paused and the slow sale's shoppers and what they saw
	notes []string     // what setting up found worth saying
}

func newTraffic(load Load, st *stack, setUp time.Duration) (*traffic, error) {
	keys, err := tokens.ParseKeySet(tokenKeys)
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	return &traffic{
		load: load, st: st, setUpTime: setUp, rec: rec, c: newClient(load.RequestTimeout, rec),
		users:   tokens.NewDevUserIssuer([]byte(userSecret), "", 2*time.Hour, nil),
		issuer:  tokens.NewIssuer(keys, tokens.IssuerOptions{}),
		charges: map[string]string{},
		lines:   newLineTraffic(),
	}, nil
}

// edge is the URL of path on the first edge, which the crowd and the probes
// use.
func (t *traffic) edge(path string) string { return t.edgeN(0, path) }

// edgeN is the URL of path on edge i.
func (t *traffic) edgeN(i int, path string) string { return "http://" + t.st.edges[i].addr + path }

// setUp creates the four sales, starting t.setUpTime from now, waits
// until every edge serves them, and sets their admission: the line sales'
// once the edges have raised their serving ceilings at the default rate, as
// a sale ops change after it was listed has them.
func (t *traffic) setUp(ctx context.Context) error {
	t.zero = time.Now().Add(t.setUpTime).Truncate(time.Second).Add(time.Second)
	sale := func(id, sku string, stock int) map[string]any {
		return map[string]any{
			"sale_id": id, "name": "Chaos " + id,
			"starts_at": t.zero.UTC().Format(time.RFC3339), "ends_at": t.zero.Add(time.Hour).UTC().Format(time.RFC3339),
			"hold_ttl_s": t.load.HoldTTLS, "per_account_limit": 1,
			"skus": []map[string]any{{"sku": sku, "name": sku, "price_minor": 49900, "currency": "INR", "stock": stock}},
		}
	}
	sales := []map[string]any{sale(shopSale, shopSKU, t.load.Stock), sale(probeSale, probeSKU, probeStock),
		sale(pausedSale, lineSKU, 10), sale(slowSale, lineSKU, 10)}
	for i := range t.load.PastSales {
		past := sale(fmt.Sprintf("chaos-past-%02d", i), "old", 10)
		start := t.zero.Add(-time.Duration(3+i) * time.Hour)
		past["starts_at"], past["ends_at"] = start.UTC().Format(time.RFC3339), start.Add(time.Hour).UTC().Format(time.RFC3339)
		sales = append(sales, past)
	}
	for _, s := range sales {
		status, body, err := admin(ctx, "POST", "http://"+t.st.originAdmin+"/admin/sales", s)
		if err != nil || status != 201 {
			return fmt.Errorf("create sale %s: %d %s %v", s["sale_id"], status, body, err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, e := range t.st.edges {
		for _, id := range []string{shopSale, probeSale, pausedSale, slowSale} {
			for {
				status, _, _ := admin(ctx, "GET", "http://"+e.addr+"/v1/sales/"+id, nil)
				if status == 200 {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("%s did not serve sale %s within 15 s", e.name, id)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	for _, id := range []string{pausedSale, slowSale} {
		if err := t.waitServingCeiling(ctx, id, 5*time.Second); err != nil {
			t.notes = append(t.notes, fmt.Sprintf("ops changed %s before the edges had raised its serving ceiling: %v", id, err))
		}
	}
	for _, c := range []struct {
		id   string
		body map[string]any
	}{
		{shopSale, map[string]any{"rate_per_s": t.load.RatePerS}},
		{probeSale, map[string]any{"rate_per_s": 10_000}},
		{pausedSale, map[string]any{"paused": true}},
		{slowSale, map[string]any{"rate_per_s": t.load.SlowRatePerS}},
	} {
		status, b, err := admin(ctx, "PUT", "http://"+t.st.edges[0].admin+"/admin/sales/"+c.id+"/admission", c.body)
		var got struct {
			NowServing int64 `json:"now_serving"`
		}
		if err != nil || status != 200 || json.Unmarshal(b, &got) != nil {
			return fmt.Errorf("set admission of %s: %d %s %v", c.id, status, b, err)
		}
		if c.id == pausedSale {
			t.lines.atPause = got.NowServing
		}
	}
	if time.Until(t.zero) < 0 {
		return errors.New("setting up took longer than the time to the sale's start")
	}
	return nil
}

// crowd makes the shoppers, arriving evenly over ArrivalS.
func (t *traffic) crowd() error {
	rng := rand.New(rand.NewPCG(t.load.Seed, 0xc4a05))
	n := t.load.Shoppers
	for i := range n {
		sh := &shopper{
			account:  fmt.Sprintf("shopper-%04d", i),
			ip:       fmt.Sprintf("10.%d.%d.%d", 1+i/60000, (i/250)%250, 1+i%250),
			arrival:  time.Duration(float64(i)/float64(n)*t.load.ArrivalS*float64(time.Second)) + 50*time.Millisecond,
			payer:    rng.Float64() < t.load.PayShare,
			payDelay: 300*time.Millisecond + time.Duration(rng.Int64N(int64(700*time.Millisecond))),
		}
		var err error
		if sh.userToken, err = t.users.Issue(sh.account); err != nil {
			return err
		}
		t.shoppers = append(t.shoppers, sh)
	}
	return nil
}

// runShoppers plays the crowd and returns when every shopper is done.
func (t *traffic) runShoppers(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sh := range t.shoppers {
		if !sleepUntil(ctx, t.zero.Add(sh.arrival)) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			life, cancel := context.WithDeadline(ctx, t.zero.Add(sh.arrival+time.Duration(t.load.LifeS*float64(time.Second))))
			defer cancel()
			t.shop(life, sh)
		}()
	}
	wg.Wait()
}

type queueAnswer struct {
	QueueToken     string `json:"queue_token"`
	State          string `json:"state"`
	Position       int64  `json:"position"`
	NowServing     int64  `json:"now_serving"`
	PollAfterMS    int64  `json:"poll_after_ms"`
	AdmissionToken string `json:"admission_token"`
}

// retriable: the stack asked to come back (or did not answer).
func retriable(r reply) bool { return r.status == 0 || r.status == 429 || r.status == 503 }

// shop: join, poll as told, reserve when admitted, then order and pay (or
// walk away). Every wait is bounded by the shopper's life (ctx).
func (t *traffic) shop(ctx context.Context, sh *shopper) {
	var ans queueAnswer
	for {
		r := t.c.do(t.ctx, request{endpoint: "join", method: "POST", url: t.edge("/v1/sales/" + shopSale + "/queue"), token: sh.userToken, ip: sh.ip})
		if r.status == 202 && r.decode(&ans) {
			break
		}
		if r.status == 409 && r.code == "sold_out" {
			sh.fate = "sold_out"
			return
		}
		if !retriable(r) {
			sh.fate = "refused:" + codeOf(r)
			return
		}
		if !sleepFor(ctx, retryWait(r)) {
			return
		}
	}
	sh.queueToken, sh.position = ans.QueueToken, ans.Position
	wait := pollWait(ans.PollAfterMS)
	for {
		if !sleepFor(ctx, wait) {
			return
		}
		r := t.c.do(t.ctx, request{endpoint: "status", method: "GET", url: t.edge("/v1/sales/" + shopSale + "/queue/status"), token: sh.queueToken, ip: sh.ip,
			header: map[string]string{"X-User-Token": sh.userToken}})
		if r.status != 200 {
			if !retriable(r) {
				sh.fate = "refused:" + codeOf(r)
				return
			}
			wait = retryWait(r)
			continue
		}
		ans = queueAnswer{}
		r.decode(&ans)
		sh.obs = append(sh.obs, observation{at: time.Now(), state: ans.State, position: ans.Position, nowServing: ans.NowServing})
		wait = pollWait(ans.PollAfterMS)
		switch ans.State {
		case "waiting":
			continue
		case "sold_out":
			sh.fate = "sold_out"
			return
		case "closed":
			sh.fate = "closed"
			return
		case "admitted":
			sh.admitted = true
			if done := t.reserve(ctx, sh, ans.AdmissionToken); done {
				return
			}
		}
	}
}

// reserve presses Buy; it reports whether the shopper is done (false: the
// admission token was refused, back to the line for a fresh one).
func (t *traffic) reserve(ctx context.Context, sh *shopper, admission string) bool {
	body := map[string]string{"sku": shopSKU, "idempotency_key": "k-" + sh.account}
	for {
		r := t.c.do(t.ctx, request{endpoint: "reserve", method: "POST", url: t.edge("/v1/sales/" + shopSale + "/reserve"), token: admission, ip: sh.ip, body: body,
			header: map[string]string{"X-User-Token": sh.userToken}})
		var res struct {
			ReservationID string `json:"reservation_id"`
		}
		switch {
		case (r.status == 201 || r.status == 200) && r.decode(&res):
			sh.fate = "reserved"
			if r.status == 201 {
				sh.reservedID = res.ReservationID
				t.accept(accepted{id: res.ReservationID, account: sh.account, sale: shopSale, admission: admission, sku: shopSKU, ip: sh.ip})
			}
			t.pay(ctx, sh, res.ReservationID)
			return true
		case r.status == 409 && r.code == "sold_out":
			sh.fate = "sold_out"
			return true
		case r.status == 401:
			return false
		case retriable(r):
			if !sleepFor(ctx, retryWait(r)) {
				return true
			}
		default:
			sh.fate = "refused:" + codeOf(r)
			return true
		}
	}
}

// pay makes the order, pays on the gateway, and waits to see it paid.
func (t *traffic) pay(ctx context.Context, sh *shopper, reservation string) {
	if !sh.payer {
		return
	}
	var order struct {
		OrderID string `json:"order_id"`
		Status  string `json:"status"`
		Payment *struct {
			IntentID string `json:"intent_id"`
		} `json:"payment"`
	}
	body := map[string]string{"reservation_id": reservation, "idempotency_key": "o-" + sh.account}
	for {
		r := t.c.do(t.ctx, request{endpoint: "order", method: "POST", url: t.edge("/v1/orders"), token: sh.userToken, ip: sh.ip, body: body})
		if (r.status == 201 || r.status == 200) && r.decode(&order) && order.Payment != nil {
			break
		}
		if !retriable(r) || !sleepFor(ctx, retryWait(r)) {
			return
		}
	}
	sh.orderID, sh.intentID = order.OrderID, order.Payment.IntentID
	if !sleepFor(ctx, sh.payDelay) {
		return
	}
	for {
		r := t.c.do(t.ctx, request{endpoint: "gateway_pay", method: "POST", url: "http://" + t.st.gatewayAddr + "/sandbox/intents/" + sh.intentID + "/pay",
			token: gatewayControlToken})
		var in struct {
			Status string `json:"status"`
		}
		if r.status == 200 && r.decode(&in) {
			if in.Status == "succeeded" {
				sh.charged = true
				t.mu.Lock()
				t.charges[sh.intentID] = sh.orderID
				t.mu.Unlock()
			}
			break
		}
		if r.status != 0 && r.status < 500 || !sleepFor(ctx, 500*time.Millisecond) {
			return
		}
	}
	for sleepFor(ctx, 500*time.Millisecond) {
		r := t.c.do(t.ctx, request{endpoint: "order_get", method: "GET", url: t.edge("/v1/orders/" + sh.orderID), token: sh.userToken, ip: sh.ip})
		if r.status == 200 && r.decode(&order) && order.Status != "pending_payment" {
			sh.sawPaid = order.Status == "paid"
			return
		}
	}
}

func (t *traffic) accept(a accepted) {
	a.at = time.Now()
	t.mu.Lock()
	t.accepted = append(t.accepted, a)
	t.mu.Unlock()
}

// runProbes reserves and joins on the probe sale every ProbeEvery, each
// with a fresh account, until ctx ends: whether the stack works, moment by
// moment. A probe in flight is not waited for beyond its own budget.
func (t *traffic) runProbes(ctx context.Context) {
	tick := time.NewTicker(t.load.ProbeEvery)
	defer tick.Stop()
	var wg sync.WaitGroup
	var inFlight atomic.Int32
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if inFlight.Load() >= 32 {
			continue
		}
		inFlight.Add(2)
		wg.Add(2)
		ip := fmt.Sprintf("10.250.%d.%d", n/250%250, 1+n%250)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			t.probeReserve(ctx, fmt.Sprintf("probe-r-%05d", n), ip)
		}()
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			t.probeJoin(ctx, fmt.Sprintf("probe-j-%05d", n), ip)
		}()
	}
}

func (t *traffic) probeReserve(ctx context.Context, account, ip string) {
	admission, _, err := t.issuer.Admission(probeSale, account, 1)
	if err != nil {
		return
	}
	user, err := t.users.Issue(account)
	if err != nil {
		return
	}
	sent := time.Now()
	r := t.c.do(t.ctx, request{endpoint: "probe_reserve", method: "POST", url: t.edge("/v1/sales/" + probeSale + "/reserve"),
		token: admission, ip: ip, body: map[string]string{"sku": probeSKU, "idempotency_key": "p-" + account}, header: map[string]string{"X-User-Token": user}})
	var res struct {
		ReservationID string `json:"reservation_id"`
	}
	ok := r.status == 201 && r.decode(&res) && res.ReservationID != ""
	if ok {
		t.accept(accepted{id: res.ReservationID, account: account, sale: probeSale, admission: admission, sku: probeSKU, ip: ip})
	}
	t.mu.Lock()
	t.probes = append(t.probes, probeCall{kind: "reserve", sent: sent, done: time.Now(), ok: ok})
	t.mu.Unlock()
}

func (t *traffic) probeJoin(ctx context.Context, account, ip string) {
	token, err := t.users.Issue(account)
	if err != nil {
		return
	}
	sent := time.Now()
	r := t.c.do(t.ctx, request{endpoint: "probe_join", method: "POST", url: t.edge("/v1/sales/" + probeSale + "/queue"), token: token, ip: ip})
	t.mu.Lock()
	t.probes = append(t.probes, probeCall{kind: "join", sent: sent, done: time.Now(), ok: r.status == 202})
	t.mu.Unlock()
}

// watchSnapshot compares, every 250 ms, the edge's snapshot of the
// crowd's sale with the origin's own (its public GET, authoritative): the
// longest stretch over which they disagreed on sold-out is how stale the
// edge let its snapshot get. A reading the origin could not give is
// skipped; the edge's answers are recorded like any other.
func (t *traffic) watchSnapshot(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var since time.Time // when the current disagreement began
	hc := http.Client{Timeout: 2 * time.Second}
	type snap struct {
		SoldOut bool `json:"sold_out"`
	}
	end := func(now time.Time) {
		if !since.IsZero() {
			t.mu.Lock()
			t.stale = max(t.stale, now.Sub(since))
			t.mu.Unlock()
		}
		since = time.Time{}
	}
	for {
		select {
		case <-ctx.Done():
			end(time.Now())
			return
		case <-tick.C:
		}
		var origin, edge snap
		resp, err := hc.Get("http://" + t.st.originAddr + "/v1/sales/" + shopSale)
		if err != nil {
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&origin)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			continue
		}
		r := t.c.do(t.ctx, request{endpoint: "snapshot", method: "GET", url: t.edge("/v1/sales/" + shopSale)})
		now := time.Now()
		switch {
		case r.status != 200 || !r.decode(&edge) || edge.SoldOut == origin.SoldOut:
			end(now) // agreeing, or not claiming to know (please_wait; a 404 counts apart)
		case since.IsZero():
			since = now
		}
	}
}

// recoveredAt is when both a probe reserve and a probe join sent after
// `after` had succeeded, or false when one of them never did.
func (t *traffic) recoveredAt(after time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := map[string]time.Time{}
	for _, p := range t.probes {
		if !p.ok || p.sent.Before(after) {
			continue
		}
		if f, ok := first[p.kind]; !ok || p.done.Before(f) {
			first[p.kind] = p.done
		}
	}
	r, rok := first["reserve"]
	j, jok := first["join"]
	if !rok || !jok {
		return time.Time{}, false
	}
	if j.After(r) {
		return j, true
	}
	return r, true
}

func codeOf(r reply) string {
	if r.code != "" {
		return fmt.Sprintf("%d_%s", r.status, r.code)
	}
	return fmt.Sprint(r.status)
}

// pollWait follows the edge's poll_after_ms, kept within 200 ms and 1 s so
// a scenario's seconds are enough.
func pollWait(ms int64) time.Duration {
	return min(max(time.Duration(ms)*time.Millisecond, 200*time.Millisecond), time.Second) + jitter(100*time.Millisecond)
}

// retryWait follows Retry-After, kept within 200 ms and 2 s.
func retryWait(r reply) time.Duration {
	return min(max(r.retryAfter, 200*time.Millisecond), 2*time.Second) + jitter(200*time.Millisecond)
}

func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sleepUntil(ctx context.Context, at time.Time) bool { return sleepFor(ctx, time.Until(at)) }
