package crowdsim

import (
	"testing"
	"time"
)

// The news is timed from the source's last zero, not from the last unit:
// shoppers told before it, the CDN's delay and a return's are apart.
func TestSoldOutNews(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	c := &cdn{changes: []flagChange{
		{at(5.2), true},   // the first zero, shown
		{at(6.1), false},  // a unit back (returned at 5.9), shown
		{at(10.4), true},  // the last zero, at 10, shown
		{at(12.0), false}, // after the end of what is timed
	}}
	c.unchanged.Store(90)
	c.hits.Store(8)
	c.misses.Store(2)
	s := &sim{zero: t0, ended: sec(20), cdn: c}
	inLine := func(joined, heard float64, stays bool) *shopper {
		sh := &shopper{joined: true, joinAnswered: sec(joined), stays: stays}
		if heard > 0 {
			sh.heardSoldOut, sh.soldOutAt = true, sec(heard)
			sh.decide(fateSoldOut, sec(heard))
		}
		return sh
	}
	shoppers := []*shopper{
		inLine(1, 10.5, false), // 0.5 s after the last zero
		inLine(2, 11.0, false), // 1.0 s
		inLine(3, 5.5, true),   // told at the first zero, stayed: told before
		inLine(4, 0, false),    // never heard
		inLine(15, 16, false),  // joined after the last zero: not in line then
	}
	res := &Result{LastUnitAt: 5}
	s.soldOutNews(res, shoppers, at(10), at(5.9))
	n := res.SoldOutNews
	if n == nil {
		t.Fatal("no news measured")
	}
	near := func(got, want float64) bool { return got > want-0.01 && got < want+0.01 }
	switch {
	case !near(n.ZeroAtS, 10) || !near(n.ReturnedTailS, 5):
		t.Errorf("zero at %.2f s, returned units %.2f s; want 10, 5", n.ZeroAtS, n.ReturnedTailS)
	case !near(n.CDNS, 0.4):
		t.Errorf("to the CDN %.2f s, want 0.4", n.CDNS)
	case n.Page.Count != 2 || !near(n.Page.Max, 1.0) || !near(n.Page.P50, 0.5) && !near(n.Page.P50, 1.0):
		t.Errorf("to the pages %+v, want 2 shoppers, 0.5 and 1.0 s", n.Page)
	case n.ToldBefore != 1 || n.Missed != 1:
		t.Errorf("told before %d, missed %d; want 1 and 1", n.ToldBefore, n.Missed)
	case !near(n.ReturnedAtS, 5.9) || !near(n.ReturnShownS, 0.2):
		t.Errorf("returned at %.2f s, shown after %.2f s; want 5.9, 0.2", n.ReturnedAtS, n.ReturnShownS)
	case n.PageReads != 100:
		t.Errorf("page reads %d, want 100", n.PageReads)
	}
	// In line: 10.5-1 + 11-2 + 20-3 (stays) + 20-4 (no fate) + 16-15 = 52.5 shopper-seconds.
	if !near(n.PageReadsPerS, 100/52.5) {
		t.Errorf("page reads per shopper-second %.3f, want %.3f", n.PageReadsPerS, 100/52.5)
	}

	// A unit that came back and went again before the CDN showed it: the
	// page was told "sold out for now" for as long as it was there.
	c.changes = []flagChange{{at(5.2), true}}
	res = &Result{LastUnitAt: 5}
	s.soldOutNews(res, shoppers, at(6.3), at(6.0))
	if n := res.SoldOutNews; !near(n.ReturnShownS, 0.3) || n.CDNS != -1 {
		t.Errorf("unit back at 6.0, gone at 6.3, never shown: shown after %.2f s, CDN %.2f; want 0.3, -1", n.ReturnShownS, n.CDNS)
	}

	// A unit that came back after the last zero, shown at 12.0 s, and one
	// the CDN never showed before the run ended.
	c.changes = []flagChange{{at(10.4), true}, {at(12.0), false}}
	res = &Result{LastUnitAt: 5}
	s.soldOutNews(res, shoppers, at(10), at(11.5))
	if n := res.SoldOutNews; !n.Reopened || !near(n.ReturnShownS, 0.5) || n.Page.Count != 2 {
		t.Errorf("unit back at 11.5 after the last zero at 10, shown at 12: %+v; want reopened, shown after 0.5 s, 2 timed", n)
	}
	c.changes = []flagChange{{at(10.4), true}}
	res = &Result{LastUnitAt: 5}
	s.soldOutNews(res, shoppers, at(10), at(11.5))
	if n := res.SoldOutNews; !n.Reopened || n.ReturnShownS != -1 {
		t.Errorf("unit back at 11.5, never shown: %+v; want reopened, shown -1", n)
	}

	res = &Result{LastUnitAt: 5}
	s.soldOutNews(res, shoppers, time.Time{}, time.Time{})
	if res.SoldOutNews != nil || len(res.Notes) != 1 {
		t.Errorf("no zero in the ledger: news %+v, notes %q; want none and a note", res.SoldOutNews, res.Notes)
	}
}
