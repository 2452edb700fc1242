package crowdsim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/valyala/fastjson"
)

type fate uint8

const (
	fateNone     fate = iota
	fateReserved      // held a unit (flashgate) or bought one (naive)
	fateSoldOut       // told sold out
	fateGaveUp        // walked away without a fate (errors, the sale closed, the run ended)
)

// shopper is one person in the crowd and what happened to them. Only the
// shopper's own goroutine writes it; the run reads it after every shopper
// has finished.
type shopper struct {
	n                         int
	account, ip               string
	bot, impatient, payer     bool
	cohort                    *cohortRun    // the bot cohort and its tactics; nil for an honest shopper
	instrument                string        // the payment instrument it pays with (the gateway's payer)
	partner                   *shopper      // the account it hands its admission token to (BotCohort.ShareTokens)
	handedOn                  bool          // it has handed its admission token on
	solved                    bool          // solved a proof of work for its join: the snapshot's published challenge or a personal one
	challengeRequired         bool          // a join was answered 403 challenge_required (a personal challenge)
	tarpitted                 bool          // the edge's tarpit listed its account or address (read at the end)
	far                       bool          // shops through the far region's edges (Config.FarEdgeURL)
	stays                     bool          // keeps waiting when told "sold out" is not final
	arrival                   time.Duration // the first click, since the sale's start (negative: pre-queue)
	launched                  bool          // the simulator set the shopper going (not when the run ended first)
	rng                       *rand.Rand    // the shopper's own timing noise, from the run's seed
	started                   time.Duration // when the simulator actually set the shopper going (late when it is busy)
	payDelay                  time.Duration // time spent on the gateway's page
	userToken                 string
	joined                    bool
	joinSent, joinAnswered    time.Duration
	position                  int64         // place in the admission order (drawn, for the pre-queue)
	preIndex                  int64         // the pre-queue index its queue token carries, while its drawn place is not known
	placedByDraw              bool          // the page has just worked its place out from the snapshot's draw
	turnPolled                bool          // it polled on seeing its turn in the snapshot, and no answer since said it waits (static/app.js clears its place)
	nextTurnRead              time.Duration // the earliest read of the snapshot that can send it polling on its turn again
	admitted                  bool
	admittedAt                time.Duration
	reserveTook               time.Duration // the round trip of the reserve that got the hold
	hasAnswer                 bool
	answeredAt                time.Duration // the first honest answer: in line, in, or sold out
	heardSoldOut              bool
	soldOutAt                 time.Duration
	fate                      fate
	fateAt                    time.Duration
	paid, abandoned, refunded bool
}

// edgeOf is the edges the shopper reaches: its region's.
func (s *sim) edgeOf(sh *shopper) *client {
	if sh.far && s.far != nil {
		return s.far
	}
	return s.edge
}

// cdnOf is the CDN in front of the shopper's region.
func (s *sim) cdnOf(sh *shopper) *cdn {
	if sh.far && s.farCDN != nil {
		return s.farCDN
	}
	return s.cdn
}

// answered records the shopper's first honest answer.
func (sh *shopper) answered(at time.Duration) {
	if !sh.hasAnswer {
		sh.hasAnswer, sh.answeredAt = true, at
	}
}

// awaitsDraw: a pre-queue page that has not learned its drawn place yet.
func (sh *shopper) awaitsDraw() bool { return sh.preIndex > 0 && sh.position == 0 }

// decide records the shopper's fate; a shopper told sold out who waited on
// and then got a unit changes their fate to reserved.
func (sh *shopper) decide(f fate, at time.Duration) {
	if sh.fate == fateNone || (f == fateReserved && sh.fate == fateSoldOut) {
		sh.fate, sh.fateAt = f, at
	}
}

// queueAnswer is the edge's join and status answer. The crowd reads two
// of them a shopper on average, most in the open's seconds, so they are
// parsed with fastjson (readQueueAnswer), not by reflection: encoding/json
// and the stack growth its depth caused were a fifth of the simulator's
// CPU, on the core whose every spare millisecond is the answers' latency.
type queueAnswer struct {
	QueueToken     string `json:"queue_token"`
	State          string `json:"state"`
	Position       int64  `json:"position"`
	PollAfterMS    int64  `json:"poll_after_ms"`
	PreQueue       bool   `json:"pre_queue"`
	AdmissionToken string `json:"admission_token"`
	Final          *bool  `json:"final"`
	Error          string `json:"error"`
	Challenge      string `json:"challenge"`       // with 403 challenge_required
	DifficultyBits int64  `json:"difficulty_bits"` // the challenge's
}

var queueAnswers fastjson.ParserPool

// readQueueAnswer parses a join or status answer; a body that is not a
// JSON object reads as the zero answer.
func readQueueAnswer(body []byte) queueAnswer {
	p := queueAnswers.Get()
	defer queueAnswers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil {
		return queueAnswer{}
	}
	a := queueAnswer{
		QueueToken:     string(v.GetStringBytes("queue_token")),
		State:          string(v.GetStringBytes("state")),
		Position:       v.GetInt64("position"),
		PollAfterMS:    v.GetInt64("poll_after_ms"),
		PreQueue:       v.GetBool("pre_queue"),
		AdmissionToken: string(v.GetStringBytes("admission_token")),
		Error:          string(v.GetStringBytes("error")),
		Challenge:      string(v.GetStringBytes("challenge")),
		DifficultyBits: v.GetInt64("difficulty_bits"),
	}
	if f := v.Get("final"); f != nil {
		final := f.GetBool()
		a.Final = &final
	}
	return a
}

// maxChallenges is how many challenges in a row a shopper solves for one
// join before it gives up, as the page does: the snapshot's published one
// counts among them, so a shopper whose published solution is refused
// solves at most two personal ones after it, and gives up when the edge
// has refused maxChallenges solutions in a row.
const maxChallenges = 3

// shop plays one flashgate shopper as the shop's page does: it loads the
// snapshot (through the CDN), solves the proof of work the snapshot
// publishes, if any, for its account, joins once with it (and when the
// edge answers 403 challenge_required instead, solves that personal
// challenge and joins again), then polls its status as told while the page
// re-reads the snapshot every PageRefreshS; it reserves when admitted (a
// person's reaction later), and stops at sold out unless it is one who
// stays (a sold-out that is not final may turn into units coming back). A
// bot does the same with its cohort's tactics: it reads the snapshot as
// the page does, and solves on its cohort's CPU.
func (s *sim) shop(ctx context.Context, sh *shopper) {
	sh.started = s.since()
	join := map[string]string{"X-Forwarded-For": sh.ip}                                  // and a solved challenge, when there is one
	polling := map[string]string{"X-Forwarded-For": sh.ip, "X-User-Token": sh.userToken} // as the page polls
	stop, snap := s.readPage(sh)
	if stop {
		return
	}

	// Solve the published challenge before the join, which then carries it.
	// One the shopper cannot solve (malformed) is left out: the edge asks
	// for a personal one.
	challenges := 0
	if pub := snap.Challenge; pub.Value != "" {
		solved, ok := s.solve(ctx, sh, pub.Value, pub.DifficultyBits, join)
		if !ok {
			return
		}
		if solved {
			challenges++
		}
	}

	// Join the line.
	var ans queueAnswer
	sh.joinSent = s.since()
	for attempt := 0; ; attempt++ {
		r := s.edgeOf(sh).do(request{endpoint: epJoin, method: "POST", path: "/v1/sales/" + s.sale + "/queue", token: sh.userToken, header: join})
		ans = readQueueAnswer(r.body)
		switch {
		case r.status == 202:
		case r.status == 403 && ans.Error == "challenge_required" && challenges < maxChallenges:
			challenges++
			sh.challengeRequired = true
			solved, ok := s.solve(ctx, sh, ans.Challenge, ans.DifficultyBits, join)
			if !ok {
				return
			}
			if !solved {
				sh.decide(fateGaveUp, s.since())
				return
			}
			continue
		case r.status == 409 && ans.Error == "sold_out":
			s.heardSoldOut(sh)
			return
		case (r.status == 429 || r.status == 503 || r.status == 0) && attempt < s.maxRetries(sh):
			if !s.sleep(ctx, s.retryWait(sh, r)) {
				return
			}
			continue
		default:
			sh.decide(fateGaveUp, s.since())
			return
		}
		break
	}
	sh.joined, sh.joinAnswered, sh.position = true, s.since(), ans.Position
	sh.answered(sh.joinAnswered) // "you are in line, about N s"
	queueToken := ans.QueueToken
	if ans.PreQueue && ans.Position == 0 && !sh.hammers() { // hammering bots poll; pages and polite scripts watch the draw
		sh.preIndex = preQueueIndex(queueToken)
	}
	refresh := time.Duration(s.cfg.PageRefreshS * float64(time.Second))
	nextPoll := s.since() + s.pollWait(sh, time.Duration(ans.PollAfterMS)*time.Millisecond)
	if sh.preIndex > 0 && nextPoll >= 0 {
		nextPoll += drawBackstop // the poll after the start: the snapshot's draw tells it sooner
	}
	nextPage := s.since() + refresh

	for failures := 0; ; {
		if refresh > 0 && nextPage < nextPoll {
			read, ok := s.awaitPage(ctx, sh, &nextPage, nextPoll, refresh)
			if !ok {
				return
			}
			if !read {
				continue // the poll is due first
			}
			stop, serving := s.readPageAt(sh, nextPage-refresh)
			if stop {
				return
			}
			if sh.placedByDraw { // its place is known now: the poll that would have told it is not needed
				sh.placedByDraw = false
				nextPoll = s.since() + s.pollWait(sh, drawnPlacePoll(sh.position))
			}
			if !sh.turnPolled && sh.position > 0 && serving >= sh.position && nextPoll > s.since() {
				// The snapshot shows the shopper's turn: ask for the admission
				// now, and on the turn again no sooner than the next read.
				nextPoll = s.since()
				sh.turnPolled, sh.nextTurnRead = true, nextPage
			}
			continue
		}
		if !s.sleep(ctx, nextPoll-s.since()) {
			return
		}
		r := s.edgeOf(sh).do(request{endpoint: epStatus, method: "GET", path: "/v1/sales/" + s.sale + "/queue/status", token: queueToken, header: polling})
		if r.status != 200 {
			if r.status == 429 || r.status == 503 || r.status == 0 {
				failures++
				if failures > 30 {
					sh.decide(fateGaveUp, s.since())
					return
				}
				nextPoll = s.since() + s.retryWait(sh, r)
				continue
			}
			sh.decide(fateGaveUp, s.since())
			return
		}
		failures = 0
		ans = readQueueAnswer(r.body)
		sh.turnPolled = ans.State != "waiting" // the page keeps its place only while told it waits
		if ans.Position > 0 {
			sh.position, sh.preIndex = ans.Position, 0
		}
		wait := time.Duration(ans.PollAfterMS) * time.Millisecond
		if wait <= 0 {
			wait = r.retryAfter
		}
		switch ans.State {
		case "waiting":
		case "admitted":
			if !sh.admitted {
				sh.admitted, sh.admittedAt = true, s.since()
			}
			if !s.sleep(ctx, s.reaction(sh)) { // finding the item and pressing Buy
				return
			}
			shared := s.handOn(ctx, sh, ans.AdmissionToken)
			res := s.reserve(ctx, sh, ans.AdmissionToken)
			<-shared
			switch res {
			case reserved, gone:
				return
			case soldOut:
				if !sh.stays {
					return
				}
				wait = max(wait, 2*time.Second)
			}
		case "sold_out":
			s.heardSoldOut(sh)
			if (ans.Final != nil && *ans.Final) || !sh.stays {
				return
			}
			wait = max(wait, 2*time.Second)
		default: // closed
			sh.decide(fateGaveUp, s.since())
			return
		}
		nextPoll = s.since() + s.pollWait(sh, wait)
	}
}

// awaitPage waits for the page's next refresh that could change its
// course, or for its poll (at nextPoll), whichever comes first. The page
// re-reads the snapshot every refresh, from *nextPage on; rather than
// waking for each read, the shopper watches the CDN (cdn.watch) and, once
// the CDN holds a snapshot that shows its turn or a sold-out, sleeps until
// the first refresh at or after that moment. The refreshes before it are
// counted as the CDN's unchanged reads, and *nextPage moves past them. It
// reports whether the page reads the snapshot now (false: the poll is
// due), and ok false when the run has ended.
func (s *sim) awaitPage(ctx context.Context, sh *shopper, nextPage *time.Duration, nextPoll, refresh time.Duration) (read, ok bool) {
	c := s.cdnOf(sh)
	turn := sh.position
	if sh.turnPolled {
		turn = 0 // the page has asked already; it waits for the answer's news
	}
	w := c.watch(turn, sh.awaitsDraw(), sh.heardSoldOut)
	fired, ok := s.sleepOr(ctx, nextPoll-s.since(), w.fired)
	if !fired {
		c.unwatch(w)
	}
	if !ok {
		return false, false
	}
	from := s.since() // the poll is due: the refreshes before now changed nothing
	if fired {
		// The first refresh from then on reads it, however late this
		// goroutine woke, and none before the page's next read after the
		// one that sent it polling on its turn.
		from = w.firedAt.Sub(s.zero)
		if turn > 0 {
			from = max(from, sh.nextTurnRead)
		}
	}
	switch {
	case fired && s.cfg.PageWatch:
		// The page's watch was held at the edge and answered as the news
		// came: it reads it then, not at a refresh after, and goes on a
		// second from there. Its reads before the held one changed nothing.
		if *nextPage < from {
			c.unchanged.Add(int64((from - *nextPage) / refresh))
		}
		*nextPage = from
	case *nextPage < from:
		skipped := (from - *nextPage + refresh - 1) / refresh
		*nextPage += skipped * refresh
		c.unchanged.Add(int64(skipped))
	}
	if !fired || *nextPage >= nextPoll {
		return false, true
	}
	if !s.sleep(ctx, *nextPage-s.since()) {
		return false, false
	}
	*nextPage += refresh
	return true, true
}

// readPage loads the snapshot as the page does, through the CDN, now.
// It reports whether the shopper stops there, and what the page read in
// it (nothing when it did not load).
func (s *sim) readPage(sh *shopper) (stop bool, snap saleFlags) {
	r, snap := s.cdnOf(sh).get()
	if r.status != 200 {
		snap = saleFlags{}
	}
	stop, _ = s.onPage(sh, r.status, snap)
	return stop, snap
}

// readPageAt is the page's refresh at at (since the start): it reads what
// the CDN held then, however late the shopper's goroutine got there.
func (s *sim) readPageAt(sh *shopper, at time.Duration) (stop bool, nowServing int64) {
	status, snap := s.cdnOf(sh).readAt(s.zero.Add(at))
	return s.onPage(sh, status, snap)
}

// onPage is what the page makes of the snapshot: a sold-out sale is news,
// its now_serving tells a waiting page when its turn has come (it then
// polls its status at once rather than when told, docs/API.md), and its
// revealed draw tells a pre-queue page its place (draw.go).
func (s *sim) onPage(sh *shopper, status int, snap saleFlags) (stop bool, nowServing int64) {
	if status != 200 {
		return false, 0
	}
	if sh.awaitsDraw() {
		if p := s.draws.place(snap, sh.preIndex); p > 0 {
			sh.position, sh.preIndex, sh.placedByDraw = p, 0, true
		}
	}
	if !snap.SoldOut {
		return false, snap.NowServing
	}
	s.heardSoldOut(sh)
	return snap.Final || !sh.stays, snap.NowServing
}

func (s *sim) heardSoldOut(sh *shopper) {
	if !sh.heardSoldOut {
		sh.heardSoldOut, sh.soldOutAt = true, s.since()
	}
	sh.answered(s.since())
	sh.decide(fateSoldOut, s.since())
}

type reserveResult int

const (
	reserved reserveResult = iota
	soldOut
	tryAgain // the admission token lapsed: back to the line for a fresh one
	gone     // the shopper stopped
)

// reserve presses Buy with an admission token, and pays or walks away.
func (s *sim) reserve(ctx context.Context, sh *shopper, admission string) reserveResult {
	xff := map[string]string{"X-Forwarded-For": sh.ip, "X-User-Token": sh.userToken}
	body := map[string]string{"sku": s.sku, "idempotency_key": "k-" + sh.account}
	for attempt := 0; ; attempt++ {
		sent := s.since()
		r := s.edgeOf(sh).do(request{endpoint: epReserve, method: "POST", path: "/v1/sales/" + s.sale + "/reserve", token: admission, body: body, header: xff})
		var res struct {
			ReservationID string `json:"reservation_id"`
			Error         string `json:"error"`
		}
		r.decode(&res)
		switch {
		case r.status == 201 || r.status == 200:
			if r.status == 201 && s.reservedUnits.Add(1) == int64(s.cfg.Stock) {
				s.lastUnitAt.Store(int64(s.since()))
			}
			sh.reserveTook = s.since() - sent
			sh.answered(s.since())
			sh.decide(fateReserved, s.since())
			s.pay(ctx, sh, res.ReservationID)
			return reserved
		case r.status == 409 && res.Error == "sold_out":
			s.heardSoldOut(sh)
			return soldOut
		case r.status == 401:
			return tryAgain
		case (r.status == 429 || r.status == 503 || r.status == 0) && attempt < s.maxRetries(sh):
			if !s.sleep(ctx, s.retryWait(sh, r)) {
				return gone
			}
		default: // 403 limit_reached and the like
			sh.decide(fateGaveUp, s.since())
			return gone
		}
	}
}

// pay makes the order and pays on the gateway's page, or walks away and
// lets the hold expire.
func (s *sim) pay(ctx context.Context, sh *shopper, reservationID string) {
	if !sh.payer {
		sh.abandoned = true
		return
	}
	var order orderAnswer
	body := map[string]string{"reservation_id": reservationID, "idempotency_key": "o-" + sh.account}
	for attempt := 0; ; attempt++ {
		r := s.edgeOf(sh).do(request{endpoint: epOrderCreate, method: "POST", path: "/v1/orders", token: sh.userToken, body: body,
			header: map[string]string{"X-Forwarded-For": sh.ip}})
		r.decode(&order)
		if (r.status == 201 || r.status == 200) && order.Payment != nil {
			break
		}
		if (r.status == 201 || r.status == 200) && order.Status == "pending_payment" && s.awaitPayLink(ctx, sh, &order) {
			break // the gateway was slow: the page read the order until its link was there
		}
		if (r.status == 503 || r.status == 429 || r.status == 0) && attempt < 5 {
			if !s.sleep(ctx, s.retryWait(sh, r)) {
				return
			}
			continue
		}
		sh.abandoned = true
		return
	}
	if !s.sleep(ctx, sh.payDelay) { // reading the gateway's page
		return
	}
	s.gateway.do(request{endpoint: epGatewayPay, method: "POST", path: "/sandbox/intents/" + order.Payment.IntentID + "/pay",
		token: s.cfg.GatewayToken, body: map[string]string{"payer": sh.instrument}})
	// The page comes back to the shop and shows the order's outcome,
	// looking again every second until the webhook has settled it.
	for range 30 {
		if !s.sleep(ctx, time.Second) {
			return
		}
		r := s.edgeOf(sh).do(request{endpoint: epOrderGet, method: "GET", path: "/v1/orders/" + order.OrderID, token: sh.userToken,
			header: map[string]string{"X-Forwarded-For": sh.ip}})
		if r.status == 200 && r.decode(&order) && order.Status != "pending_payment" {
			sh.paid = order.Status == "paid"
			sh.refunded = order.Status == "refunded"
			return
		}
	}
}

// orderAnswer is the edge's answer for an order.
type orderAnswer struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	Payment *struct {
		IntentID string `json:"intent_id"`
	} `json:"payment"`
	PollAfterMS int64  `json:"poll_after_ms"`
	Error       string `json:"error"`
}

// awaitPayLink reads an order whose payment link the gateway has not made
// yet, as the page does: every poll_after_ms (a second when none), up to
// 30 times. It reports whether the link came, into order.
func (s *sim) awaitPayLink(ctx context.Context, sh *shopper, order *orderAnswer) bool {
	for range 30 {
		wait := time.Duration(order.PollAfterMS) * time.Millisecond
		if wait <= 0 {
			wait = time.Second
		}
		if !s.sleep(ctx, wait) {
			return false
		}
		r := s.edgeOf(sh).do(request{endpoint: epOrderGet, method: "GET", path: "/v1/orders/" + order.OrderID, token: sh.userToken,
			header: map[string]string{"X-Forwarded-For": sh.ip}})
		switch {
		case r.status == 200 && r.decode(order) && order.Payment != nil:
			return true
		case r.status == 200 && order.Status == "pending_payment":
		case r.status != 429 && r.status != 503 && r.status != 0:
			return false
		}
	}
	return false
}

// hammers reports whether the shopper is a bot that polls at its own pace
// (BotCohort.PollMS), whatever it is told.
func (sh *shopper) hammers() bool { return sh.cohort != nil && sh.cohort.PollMS > 0 }

// pollWait is how long a shopper waits before the next poll: as told, but
// the impatient press reload at twice the pace they were told (at most
// once a second), and hammering bots poll at their own pace. Browsers'
// timers and networks add a little noise (up to 10%).
func (s *sim) pollWait(sh *shopper, told time.Duration) time.Duration {
	var d time.Duration
	switch {
	case sh.hammers():
		return time.Duration(sh.cohort.PollMS) * time.Millisecond
	case sh.impatient:
		d = max(told/2, time.Second)
	case told <= 0:
		d = time.Second
	default:
		d = told
	}
	return d + time.Duration(sh.rng.Int64N(int64(d/10)+1))
}

// retryWait follows Retry-After (a second when there is none); hammering
// bots do not.
func (s *sim) retryWait(sh *shopper, r reply) time.Duration {
	if sh.hammers() {
		return time.Duration(sh.cohort.PollMS) * time.Millisecond
	}
	if r.retryAfter > 0 {
		return r.retryAfter + time.Duration(sh.rng.Int64N(int64(500*time.Millisecond)))
	}
	return time.Second
}

func (s *sim) maxRetries(sh *shopper) int {
	if sh.bot {
		return 200
	}
	return 20
}

// launch sets each shopper going at its arrival (shoppers are sorted by
// arrival), each with run in a goroutine of its own, until ctx ends, and
// waits for every one it set going.
func (s *sim) launch(ctx context.Context, shoppers []*shopper, run func(context.Context, *shopper)) {
	var wg sync.WaitGroup
	for _, sh := range shoppers {
		if !s.sleep(ctx, time.Until(s.zero.Add(sh.arrival))) {
			break
		}
		wg.Add(1)
		sh.launched = true
		go func() {
			defer wg.Done()
			run(ctx, sh)
		}()
	}
	wg.Wait()
}

// sleepOr waits d, or until wake is closed or the run ends; it reports
// whether wake was closed, and whether to go on.
func (s *sim) sleepOr(ctx context.Context, d time.Duration, wake <-chan struct{}) (woken, ok bool) {
	if d <= 0 {
		select {
		case <-wake:
			return true, ctx.Err() == nil
		default:
			return false, ctx.Err() == nil
		}
	}
	t, _ := s.timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	defer s.timers.Put(t)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-wake:
		return true, true
	case <-t.C:
		return false, true
	}
}

// sleep waits d or until the run ends; it reports whether to go on.
func (s *sim) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t, _ := s.timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	defer s.timers.Put(t)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
