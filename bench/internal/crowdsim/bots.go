package crowdsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// The bot cohorts (Scenario.Hammering, Scenario.Smart) and what they get:
// who they are (addresses, payment instruments, arrival), the tactics that
// differ from a person's page (shopper.go asks hammers, reaction and
// handOn), and the fairness table that sets each cohort beside the honest
// shoppers who arrived when it did.

// cohortRun is a bot cohort in a run: its tactics, and the answers to the
// reserves its accounts made with one another's admission tokens.
type cohortRun struct {
	BotCohort
	index int // its place among the run's cohorts: which addresses it has

	shared struct {
		tried, refused, ownersHold, extraHolds, other atomic.Int64
	}
}

// cohortRuns are the scenario's cohorts for one run.
func cohortRuns(sc Scenario) []*cohortRun {
	var out []*cohortRun
	for i, c := range sc.Cohorts() {
		out = append(out, &cohortRun{BotCohort: c, index: i})
	}
	return out
}

// botArrivalSpread is how long a cohort takes to set all its accounts
// going: 200 ms from the pre-queue's start, or from the open.
const botArrivalSpread = 200 * time.Millisecond

// ownNetworks is how many /24s a cohort whose accounts each have an
// address of their own spreads them over: 100.64.0.0/10 (shared address
// space, which no honest shopper of the simulator uses) split in two, a
// half per cohort.
const ownNetworks = 8192

// botAddress is the address account j of cohort c sends (X-Forwarded-For).
// Accounts that share addresses take them round robin from one /24
// (TEST-NET-3 for the first cohort, TEST-NET-2 for the second); accounts
// with an address each get one in a /24 of their own, as residential
// proxies give (after ownNetworks accounts the /24s come round again).
func botAddress(c *cohortRun, j int, rng *rand.Rand) string {
	if c.Addresses > 0 {
		net := [...]string{"203.0.113", "198.51.100"}[c.index%2]
		return fmt.Sprintf("%s.%d", net, 1+j%min(c.Addresses, 254))
	}
	// An odd multiplier is a bijection modulo a power of two: the first
	// ownNetworks accounts land in as many different /24s, scattered.
	n := (j*2_654_435_761 + 1) % ownNetworks
	return fmt.Sprintf("100.%d.%d.%d", 64+32*(c.index%2)+(n>>8), n&255, 1+rng.IntN(254))
}

// botInstrument is the payment instrument account j of cohort c pays with:
// one per AccountsPerInstrument accounts.
func botInstrument(c *cohortRun, j int) string {
	return fmt.Sprintf("upi:%s-%05d@okicici", c.Name, j/max(c.AccountsPerInstrument, 1))
}

// honestInstrument is an honest shopper's own payment instrument.
func honestInstrument(account string) string { return "upi:" + account + "@okhdfc" }

// botShoppers makes cohort c's accounts, numbered from first: their
// names, addresses, instruments and arrivals (within botArrivalSpread of
// the pre-queue's start or of the open), and, when it shares admission
// tokens, each account's partner (the next one, round the cohort).
func botShoppers(c *cohortRun, first int, sc Scenario, seed uint64) []*shopper {
	rng := rand.New(rand.NewPCG(seed, 0xb07+uint64(c.index)))
	from := time.Duration(0)
	if c.PreQueue {
		from = -time.Duration(sc.PreQueueS * float64(time.Second))
	}
	out := make([]*shopper, c.Accounts)
	for j := range out {
		out[j] = &shopper{
			n: first + j, account: fmt.Sprintf("%s-%05d", c.Name, j), bot: true, cohort: c, payer: true, stays: true,
			ip: botAddress(c, j, rng), instrument: botInstrument(c, j),
			arrival: from + time.Duration(rng.Int64N(int64(botArrivalSpread))), payDelay: 200 * time.Millisecond,
		}
	}
	if c.ShareTokens && len(out) > 1 {
		for j, sh := range out {
			sh.partner = out[(j+1)%len(out)]
		}
	}
	return out
}

// reaction is how long after "It's your turn" the shopper presses Buy: a
// person's reaction (Scenario.ReactionS, 0.5 to 1.5 times it), none for a
// bot that reserves at once.
func (s *sim) reaction(sh *shopper) time.Duration {
	if sh.cohort != nil && sh.cohort.InstantReserve || s.cfg.ReactionS <= 0 {
		return 0
	}
	return time.Duration(s.cfg.ReactionS * (0.5 + sh.rng.Float64()) * float64(time.Second))
}

// solve works a proof of work out as the shopper's device would: the
// real solution of challenge (the snapshot's published one, or the
// personal one of a 403 challenge_required) for the shopper's account at
// bits, the difficulty the edge's JSON gave, which goes into the join's
// headers; and then the wait its device would have taken at the modelled
// difficulty (Defences: a phone's hash rate, a server core's for a cohort
// with server CPUs), less the time the real one took. It reports whether it
// solved it (false, the headers untouched: the challenge is empty,
// malformed or too hard), and ok false when the run ended meanwhile.
func (s *sim) solve(ctx context.Context, sh *shopper, challenge string, bits int64, join map[string]string) (solved, ok bool) {
	began := time.Now()
	if challenge == "" || bits < 0 || bits > maxChallengeBits {
		return false, ctx.Err() == nil
	}
	solution, found := solveChallenge(challenge, sh.account, int(bits), maxSolveTries)
	if !found {
		return false, ctx.Err() == nil
	}
	join["X-Challenge"], join["X-Challenge-Solution"] = challenge, solution
	d := s.cfg.Defences
	rate := d.PhoneHashesPerS
	if sh.cohort != nil && sh.cohort.ServerCPU {
		rate = d.ServerHashesPerS
	}
	if !s.sleep(ctx, solveTime(sh.rng, max(d.DeviceBits, int(bits)), rate)-time.Since(began)) {
		return true, false
	}
	sh.solved = true
	return true, true
}

// handOn is the token sharing of a cohort that shares admission tokens:
// the first time an account is admitted, its partner tries to reserve with
// its admission token at the same moment as it does. The returned channel
// is closed once the partner's try is over (at once when there is none).
func (s *sim) handOn(ctx context.Context, sh *shopper, admission string) <-chan struct{} {
	done := make(chan struct{})
	if sh.partner == nil || sh.handedOn || admission == "" {
		close(done)
		return done
	}
	sh.handedOn = true
	go func() {
		defer close(done)
		s.reserveShared(ctx, sh.cohort, sh.partner, admission)
	}()
	return done
}

// reserveShared is taker's reserve with another account's admission token,
// with its own user token and address, as a script would send it; what
// came back is counted in the cohort's shared tokens. It reads only what
// the taker's own goroutine never writes.
func (s *sim) reserveShared(ctx context.Context, c *cohortRun, taker *shopper, admission string) {
	c.shared.tried.Add(1)
	header := map[string]string{"X-Forwarded-For": taker.ip, "X-User-Token": taker.userToken}
	body := map[string]string{"sku": s.sku, "idempotency_key": "k-shared-" + taker.account}
	for attempt := 0; ; attempt++ {
		r := s.edge.do(request{endpoint: epReserveShared, method: "POST", path: "/v1/sales/" + s.sale + "/reserve",
			token: admission, body: body, header: header})
		switch {
		case r.status == 201:
			c.shared.extraHolds.Add(1)
			if s.reservedUnits.Add(1) == int64(s.cfg.Stock) {
				s.lastUnitAt.Store(int64(s.since()))
			}
			return
		case r.status == 200:
			c.shared.ownersHold.Add(1)
			return
		case r.status == 401 || r.status == 403:
			c.shared.refused.Add(1)
			return
		case (r.status == 429 || r.status == 503 || r.status == 0) && attempt < 5:
			wait := time.Duration(c.PollMS) * time.Millisecond
			if wait <= 0 {
				wait = max(r.retryAfter, time.Second)
			}
			if !s.sleep(ctx, wait) {
				c.shared.other.Add(1)
				return
			}
		default:
			c.shared.other.Add(1)
			return
		}
	}
}

// sharedTokens is what the cohort's shared tokens came to; nil when it
// handed none on.
func (c *cohortRun) sharedTokens() *SharedTokens {
	if c.shared.tried.Load() == 0 {
		return nil
	}
	return &SharedTokens{
		Tried: int(c.shared.tried.Load()), Refused: int(c.shared.refused.Load()), OwnersHold: int(c.shared.ownersHold.Load()),
		ExtraHolds: int(c.shared.extraHolds.Load()), Other: int(c.shared.other.Load()),
	}
}

// honestCohort is the honest shoppers' name in the fairness table.
const honestCohort = "honest"

// groups is the fairness table: the shoppers set going, by cohort (the
// honest first, then the bot cohorts in order) and by arrival class
// (pre-queue first); for each, the accounts that held a unit, the units
// paid for and how they spread over payment instruments, and how many
// solved a proof of work, were answered 403 challenge_required and were
// tarpitted. A cohort's shared tokens go with its first row.
func groups(shoppers []*shopper, cohorts []*cohortRun) []Group {
	type key struct {
		cohort   string
		preQueue bool
	}
	rows := map[key]*Group{}
	paid := map[key]map[string]int{}
	for _, sh := range shoppers {
		if !sh.launched {
			continue
		}
		k := key{honestCohort, sh.arrival < 0}
		if sh.cohort != nil {
			k.cohort = sh.cohort.Name
		}
		g := rows[k]
		if g == nil {
			g = &Group{Cohort: k.cohort, Bot: sh.cohort != nil, PreQueue: k.preQueue}
			rows[k], paid[k] = g, map[string]int{}
		}
		g.Accounts++
		if sh.fate == fateReserved {
			g.Held++
		}
		if sh.paid {
			g.Paid++
			paid[k][sh.instrument]++
		}
		if sh.solved {
			g.Challenged++
		}
		if sh.challengeRequired {
			g.ChallengeRequired++
		}
		if sh.tarpitted {
			g.Tarpitted++
		}
	}
	order := []string{honestCohort}
	for _, c := range cohorts {
		order = append(order, c.Name)
	}
	var out []Group
	for _, name := range order {
		first := true
		for _, pre := range []bool{true, false} {
			k := key{name, pre}
			g := rows[k]
			if g == nil {
				continue
			}
			for _, n := range paid[k] {
				g.Instruments++
				g.MaxPaidPerInstrument = max(g.MaxPaidPerInstrument, n)
			}
			if g.Instruments > 0 {
				g.MeanPaidPerInstrument = float64(g.Paid) / float64(g.Instruments)
			}
			if first {
				for _, c := range cohorts {
					if c.Name == name {
						g.SharedTokens = c.sharedTokens()
					}
				}
				first = false
			}
			out = append(out, *g)
		}
	}
	return out
}

// honestAnswerP99 is the p99 time to an honest answer over the honest
// shoppers set going, as Fates.AnswerP99 counts it.
func honestAnswerP99(shoppers []*shopper, ended time.Duration) float64 {
	var t []float64
	for _, sh := range shoppers {
		if sh.launched && !sh.bot {
			t = append(t, answerTime(sh, ended))
		}
	}
	return dist(t).P99
}
