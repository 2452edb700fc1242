package crowdsim

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// finish turns the run's records into its Result: requests, timeline, fates,
// the sold-out notice, fairness and the final ledger.
func (s *sim) finish(ctx context.Context, res *Result, shoppers []*shopper) {
	sc := s.cfg.Scenario
	res.Stock = sc.Stock
	res.Endpoints = append(s.rec.endpoints(), s.gwRec.endpoints()...)
	s.rec.totals(res, 0, sc.BurstS)
	res.ReservesPerS = s.rec.rateOf(epReserve, 201)
	s.timeline(res)

	tallyFates(res, shoppers, s.ended, sc.BotAccounts(), sc.Stock)
	var lags []float64
	clientPaid := 0
	for _, sh := range shoppers {
		if !sh.launched {
			continue
		}
		lags = append(lags, (sh.started - sh.arrival).Seconds())
		if sh.paid {
			res.Fates.Paid++
			clientPaid++
		}
		if sh.abandoned {
			res.Fates.Abandoned++
		}
	}
	lag := dist(lags)
	res.StartLag = lag
	if lag.P99 > 0.1 {
		res.Notes = append(res.Notes, fmt.Sprintf("The simulator set shoppers going late (its own lag: see the pinning under Where the CPU went): "+
			"p50 %.2f s, p99 %.2f s, max %.2f s after their planned click. Times to an answer count from when a shopper actually started; "+
			"request latencies include any wait inside the simulator's own process.", lag.P50, lag.P99, lag.Max))
	}
	s.soldOutNotice(res, shoppers)
	s.soldOutNews(res, shoppers, s.ledger(ctx, res))
	if s.far != nil {
		res.Regions = []Region{
			regionOf("home", s.cfg.EdgeURL, shoppers, false, s.ended, time.Duration(s.lastUnitAt.Load())),
			regionOf("far", s.cfg.FarEdgeURL, shoppers, true, s.ended, time.Duration(s.lastUnitAt.Load())),
		}
	}
	s.fairness(res, shoppers)
	res.Bots.Groups = groups(shoppers, s.cohorts)
	res.Bots.HonestAnswerP99 = honestAnswerP99(shoppers, s.ended)
	res.Oversold = max(0, clientPaid-sc.Stock, res.Sold+res.Held-sc.Stock)
}

// tallyFates counts the shoppers' fates into res, the flashgate run's and
// the naive baseline's alike: how long the reserved and the sold-out took,
// the fates never learnt, how many launched shoppers had an answer and how
// soon, and the bots' units and share of the stock.
func tallyFates(res *Result, shoppers []*shopper, ended time.Duration, bots, stock int) {
	var reservedT, soldOutT, answerT []float64
	for _, sh := range shoppers {
		took := (sh.fateAt - sh.started).Seconds()
		switch sh.fate {
		case fateReserved:
			reservedT = append(reservedT, took)
			if sh.bot {
				res.Fairness.BotUnits++
			}
		case fateSoldOut:
			soldOutT = append(soldOutT, took)
		default:
			res.Fates.Unknown++
		}
		if sh.launched {
			answerT = append(answerT, answerTime(sh, ended))
		}
	}
	res.Fates.Reserved, res.Fates.SoldOut = dist(reservedT), dist(soldOutT)
	res.Fates.Answered, res.Fates.AnswerP99 = answeredCount(shoppers), dist(answerT).P99
	res.Fairness.BotAccounts = bots
	if stock > 0 {
		res.Fairness.BotShare = float64(res.Fairness.BotUnits) / float64(stock)
	}
}

// regionOf sums up the launched shoppers of one region (far or not); the
// bots, who all shop at home and hammer, are left out of both.
// lastUnit is when the last unit went (0: it never did).
func regionOf(name, edgeURL string, shoppers []*shopper, far bool, ended, lastUnit time.Duration) Region {
	r := Region{Name: name, EdgeURL: edgeURL}
	var answer, join, reserve, admitted, soldOut []float64
	for _, sh := range shoppers {
		if !sh.launched || sh.bot || sh.far != far {
			continue
		}
		r.Shoppers++
		if sh.hasAnswer {
			r.Answered++
		}
		answer = append(answer, answerTime(sh, ended))
		if sh.joined {
			join = append(join, (sh.joinAnswered - sh.joinSent).Seconds())
		}
		if sh.fate == fateReserved && sh.reserveTook > 0 {
			reserve = append(reserve, sh.reserveTook.Seconds())
		}
		if sh.admitted {
			admitted = append(admitted, (sh.admittedAt - sh.started).Seconds())
		}
		if d, ok, _ := soldOutDelay(sh, lastUnit); ok && lastUnit > 0 {
			soldOut = append(soldOut, d)
		}
	}
	r.Answer, r.Join, r.Reserve, r.Admitted = dist(answer), dist(join), dist(reserve), dist(admitted)
	r.SoldOutNotice = dist(soldOut)
	return r
}

// timeline adds the monitor's samples (the last of each second) to the
// per-second request counts.
func (s *sim) timeline(res *Result) {
	s.monMu.Lock()
	defer s.monMu.Unlock()
	type second struct {
		last              sample // the second's last sample
		samples, soldOuts int
	}
	bySec := map[int]*second{}
	for _, smp := range s.samples {
		sec := int(smp.at.Seconds()+1000) - 1000
		b := bySec[sec]
		if b == nil {
			b = &second{}
			bySec[sec] = b
		}
		b.last = smp
		b.samples++
		if smp.soldOut {
			b.soldOuts++
		}
	}
	fill := func(t *Second, b *second) {
		t.QueueLength, t.NowServing, t.Available = b.last.queueLength, b.last.nowServing, b.last.avail
		t.SoldOut = float64(b.soldOuts) / float64(b.samples)
	}
	for i := range res.Timeline {
		sec := int(res.Timeline[i].T)
		if b, ok := bySec[sec]; ok {
			fill(&res.Timeline[i], b)
			delete(bySec, sec)
		}
	}
	for sec, b := range bySec { // seconds with samples and no request
		t := Second{T: float64(sec)}
		fill(&t, b)
		res.Timeline = append(res.Timeline, t)
	}
	slices.SortFunc(res.Timeline, func(a, b Second) int { return int(a.T - b.T) })
	s.addCPU(res)
}

// addCPU adds the CPU meter's cores per second to the timeline's seconds
// (seconds with no request, before the crowd came, are left out).
func (s *sim) addCPU(res *Result) {
	cores := s.cpu.PerSecond()
	for i := range res.Timeline {
		res.Timeline[i].CPU = cores[int(res.Timeline[i].T)]
	}
}

// answerTime is how long a started shopper waited for a first honest
// answer; one who never got any counts as having waited until the crowd
// stopped (a lower bound), so silence is never left out of the p99.
func answerTime(sh *shopper, ended time.Duration) float64 {
	if sh.hasAnswer {
		return (sh.answeredAt - sh.started).Seconds()
	}
	return (max(ended, sh.started) - sh.started).Seconds()
}

func answeredCount(shoppers []*shopper) int {
	n := 0
	for _, sh := range shoppers {
		if sh.hasAnswer {
			n++
		}
	}
	return n
}

// soldOutNotice measures, for every shopper still in line when the last
// unit went (joined, holding nothing, not yet told), how long until they
// heard "sold out".
func (s *sim) soldOutNotice(res *Result, shoppers []*shopper) {
	last := time.Duration(s.lastUnitAt.Load())
	if last <= 0 {
		res.Notes = append(res.Notes, "The stock never ran out during the run, so there was no sold-out moment to measure.")
		return
	}
	res.LastUnitAt = last.Seconds()
	var delays []float64
	missed := 0
	for _, sh := range shoppers {
		switch d, ok, inLine := soldOutDelay(sh, last); {
		case ok:
			delays = append(delays, d)
		case inLine:
			missed++
		}
	}
	res.SoldOutNotice = dist(delays)
	if missed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d shoppers in line when the last unit went never heard \"sold out\" before the run ended (left, or ran out of retries).", missed))
	}
}

// soldOutDelay is how long after the last unit went (at last) a shopper
// who was in line then, holding nothing, heard "sold out" (ok); inLine
// without ok is one who never heard it.
func soldOutDelay(sh *shopper, last time.Duration) (d float64, ok, inLine bool) {
	inLine = sh.joined && sh.joinAnswered <= last && !(sh.heardSoldOut && sh.soldOutAt < last) &&
		!(sh.fate == fateGaveUp && sh.fateAt <= last) && sh.fate != fateReserved
	if !inLine || !sh.heardSoldOut {
		return 0, false, inLine
	}
	return (sh.soldOutAt - last).Seconds(), true, true
}

// fairness compares join order with admission order for shoppers (not
// bots) who arrived after the start: the order their joins were sent in
// against the queue positions they got, which is the order the cursor
// admits; and positions against when the admitted first saw "admitted".
func (s *sim) fairness(res *Result, shoppers []*shopper) {
	var sent, pos, admPos, admAt []float64
	for _, sh := range shoppers {
		if sh.bot || !sh.joined || sh.arrival < 0 || sh.position <= 0 {
			continue
		}
		sent = append(sent, float64(sh.joinSent))
		pos = append(pos, float64(sh.position))
		if sh.admitted {
			admPos = append(admPos, float64(sh.position))
			admAt = append(admAt, float64(sh.admittedAt))
		}
	}
	res.Fairness.RankCorrelation, res.Fairness.Compared = spearman(sent, pos), len(sent)
	res.Fairness.ObservedCorrelation, res.Fairness.ObservedCompared = spearman(admPos, admAt), len(admPos)
}

// ledger waits for the order writer to catch up and reads the final books,
// and returns when the stock count first and last reached zero and when a
// unit last came back to it, as the scripts recorded them (the latest over
// the SKUs; none when some SKU never reached zero).
func (s *sim) ledger(ctx context.Context, res *Result) (m zeroMoments) {
	var answer struct {
		SKUs []struct {
			SKU              string `json:"sku"`
			Total            int64  `json:"total"`
			Redis, DB, Drift counts
			PendingIntents   int        `json:"pending_intents"`
			FirstZeroAt      *time.Time `json:"first_zero_at"`
			LastZeroAt       *time.Time `json:"last_zero_at"`
			ReturnedAt       *time.Time `json:"returned_at"`
		} `json:"skus"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body, err := s.admin(ctx, "GET", s.cfg.OriginAdminURL+"/admin/sales/"+s.sale+"/ledger", nil)
		if err == nil && status == 200 && jsonInto(body, &answer) {
			pending := 0
			for _, k := range answer.SKUs {
				pending += k.PendingIntents
			}
			if pending == 0 || time.Now().After(deadline) {
				break
			}
		} else if time.Now().After(deadline) {
			res.Notes = append(res.Notes, fmt.Sprintf("The final ledger could not be read: %d %v.", status, err))
			return m
		}
		time.Sleep(250 * time.Millisecond)
	}
	res.InvariantOK = true
	for _, k := range answer.SKUs {
		res.Ledger = append(res.Ledger, LedgerSKU{
			SKU: k.SKU, Total: k.Total, Pending: k.PendingIntents,
			Redis:    [3]int64{k.Redis.Available, k.Redis.Held, k.Redis.Sold},
			Postgres: [3]int64{k.DB.Available, k.DB.Held, k.DB.Sold},
			Drift:    [3]int64{k.Drift.Available, k.Drift.Held, k.Drift.Sold},
		})
		res.Sold += int(k.DB.Sold)
		res.Held += int(k.DB.Held)
		d := k.DB
		if d.Available < 0 || d.Held < 0 || d.Sold < 0 || d.Available+d.Held+d.Sold != k.Total {
			res.InvariantOK = false
		}
	}
	for _, k := range answer.SKUs {
		if k.FirstZeroAt == nil || k.LastZeroAt == nil {
			return zeroMoments{}
		}
		m.first, m.last = later(m.first, *k.FirstZeroAt), later(m.last, *k.LastZeroAt)
		if k.ReturnedAt != nil {
			m.returned = later(m.returned, *k.ReturnedAt)
		}
	}
	return m
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type counts struct {
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
	Sold      int64 `json:"sold"`
}
