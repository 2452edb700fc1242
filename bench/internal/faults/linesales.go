package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// The line sales check admission itself, not the flags ops set: a sale
// paused before anyone joined (nobody may be admitted) and a sale lowered
// to Load.SlowRatePerS (admissions at that rate, plus at most a serving
// block early per Redis loss). Their shoppers join just after the start and
// poll both edges in turn through the fault and after; every edge's admin
// view of both sales is read every lineViewEvery.

// lineViewEvery is how often each edge's admin view of the line sales is
// read.
const lineViewEvery = 250 * time.Millisecond

// lineAfter is how long the line sales' shoppers go on polling after the
// fault ended (at least: they also poll as long as the crowd shops).
const lineAfter = 5 * time.Second

// lineShopper is one shopper in a line sale. Only its own goroutine writes
// it while the line runs.
type lineShopper struct {
	sale                   string
	index                  int
	account, ip, userToken string
	join                   time.Duration // after the start
	edge                   int           // the edge it joins on; its polls alternate, the first on the other
	joined                 bool
}

// lineTraffic is the line sales' shoppers and every reading of the two
// sales.
type lineTraffic struct {
	shoppers []*lineShopper
	atPause  int64 // now_serving of the paused sale as the pause answered it

	mu  sync.Mutex // guards obs
	obs map[string][]lineObs
}

func newLineTraffic() *lineTraffic { return &lineTraffic{obs: map[string][]lineObs{}} }

func (l *lineTraffic) observe(sale string, o lineObs) {
	l.mu.Lock()
	l.obs[sale] = append(l.obs[sale], o)
	l.mu.Unlock()
}

func (l *lineTraffic) observations(sale string) []lineObs {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]lineObs(nil), l.obs[sale]...)
}

// joined is how many of the sale's shoppers got a place.
func (l *lineTraffic) joined(sale string) (joined, all int) {
	for _, sh := range l.shoppers {
		if sh.sale == sale {
			all++
			if sh.joined {
				joined++
			}
		}
	}
	return joined, all
}

// lineCrowd makes the line sales' shoppers: each sale's join over the
// first 0.8 s after the start, half of them on each edge.
func (t *traffic) lineCrowd() error {
	for _, c := range []struct {
		sale, prefix string
		n, net       int
	}{{pausedSale, "paused", t.load.PausedShoppers, 252}, {slowSale, "slow", t.load.SlowShoppers, 253}} {
		for i := range c.n {
			sh := &lineShopper{
				sale: c.sale, index: i, account: fmt.Sprintf("%s-%03d", c.prefix, i),
				ip:   fmt.Sprintf("10.%d.%d.%d", c.net, i/250, 1+i%250),
				join: 50*time.Millisecond + time.Duration(i)*750*time.Millisecond/time.Duration(max(c.n, 1)),
				edge: i % len(t.st.edges),
			}
			var err error
			if sh.userToken, err = t.users.Issue(sh.account); err != nil {
				return err
			}
			t.lines.shoppers = append(t.lines.shoppers, sh)
		}
	}
	return nil
}

// runLines plays the line sales from the start until ctx ends: every
// shopper joins at its moment and polls, and each edge's admin view is
// read every lineViewEvery.
func (t *traffic) runLines(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range t.st.edges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.watchLineViews(ctx, i)
		}()
	}
	for _, sh := range t.lines.shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleepUntil(ctx, t.zero.Add(sh.join)) {
				t.queueInLine(ctx, sh)
			}
		}()
	}
	wg.Wait()
}

// queueInLine joins the shopper's sale and polls its status until ctx
// ends, alternating between the edges, whatever it is told: an admitted
// shopper is counted and polls on (it never reserves).
func (t *traffic) queueInLine(ctx context.Context, sh *lineShopper) {
	var ans queueAnswer
	for {
		r := t.c.do(t.ctx, request{endpoint: "line_join", method: "POST", url: t.edgeN(sh.edge, "/v1/sales/"+sh.sale+"/queue"), token: sh.userToken, ip: sh.ip})
		if r.status == 202 && r.decode(&ans) {
			break
		}
		if !retriable(r) || !sleepFor(ctx, lineRetryWait(r)) {
			return
		}
	}
	sh.joined = true
	t.lines.observe(sh.sale, lineObs{at: time.Now(), edge: sh.edge, shopper: sh.index, nowServing: ans.NowServing})
	wait := linePollWait(ans.PollAfterMS)
	for n := 1; ; n++ {
		if !sleepFor(ctx, wait) {
			return
		}
		e := (sh.edge + n) % len(t.st.edges)
		r := t.c.do(t.ctx, request{endpoint: "line_status", method: "GET", url: t.edgeN(e, "/v1/sales/"+sh.sale+"/queue/status"), token: ans.QueueToken, ip: sh.ip,
			header: map[string]string{"X-User-Token": sh.userToken}})
		var st queueAnswer
		if r.status != 200 || !r.decode(&st) {
			wait = lineRetryWait(r)
			continue
		}
		t.lines.observe(sh.sale, lineObs{at: time.Now(), edge: e, shopper: sh.index, admitted: st.State == "admitted", nowServing: st.NowServing})
		wait = linePollWait(st.PollAfterMS)
	}
}

// watchLineViews reads edge i's admin view of both line sales every
// lineViewEvery until ctx ends; answers other than 200 are skipped.
func (t *traffic) watchLineViews(ctx context.Context, i int) {
	tick := time.NewTicker(lineViewEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, sale := range []string{pausedSale, slowSale} {
			status, body, err := admin(ctx, "GET", "http://"+t.st.edges[i].admin+"/admin/sales/"+sale+"/admission", nil)
			var v struct {
				NowServing int64 `json:"now_serving"`
			}
			if err != nil || status != 200 || json.Unmarshal(body, &v) != nil {
				continue
			}
			t.lines.observe(sale, lineObs{at: time.Now(), edge: i, shopper: -1, nowServing: v.NowServing})
		}
	}
}

// waitServingCeiling waits until the edges have raised the sale's durable
// serving ceiling in Redis (its line hash: edge/internal/line/keys.go), so
// that ops change a line whose ceiling was set at the default rate.
func (t *traffic) waitServingCeiling(ctx context.Context, sale string, within time.Duration) error {
	deadline := time.Now().Add(within)
	key := redisPrefix + "{q:" + sale + "}:line"
	var last error
	for {
		c, err := t.st.redisClient(ctx)
		if err == nil {
			var v string
			v, err = c.HGet(ctx, key, "serving_ceiling").Result()
			_ = c.Close()
			if n, perr := strconv.ParseInt(v, 10, 64); err == nil && perr == nil && n > 0 {
				return nil
			}
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s has no serving_ceiling above 0 after %v (%v)", key, within, last)
		}
		if !sleepFor(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// linePollWait follows poll_after_ms within 350–500 ms: dense enough to
// see the line move, within the edges' 3 polls a second per account.
func linePollWait(ms int64) time.Duration {
	return min(max(time.Duration(ms)*time.Millisecond, 350*time.Millisecond), 500*time.Millisecond) + jitter(50*time.Millisecond)
}

// lineRetryWait follows Retry-After within 350 ms and 1 s.
func lineRetryWait(r reply) time.Duration {
	return min(max(r.retryAfter, 350*time.Millisecond), time.Second) + jitter(50*time.Millisecond)
}
