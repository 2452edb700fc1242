package crowdsim

import (
	"testing"
	"time"
)

// The news is timed from the source's first zero, not from the last unit's
// 201: the shoppers told before, the CDN's delay, the returned units' tail
// and a return's delay are apart.
func TestSoldOutNews(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	near := func(got, want float64) bool { return got > want-0.01 && got < want+0.01 }
	c := &cdn{changes: []flagChange{
		{at(5.2), true},  // the first zero, at 5, shown
		{at(6.1), false}, // a unit back at 5.9, shown
		{at(6.3), true},  // gone again at 6.2, shown
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
		inLine(1, 5.5, false), // 0.5 s after the first zero
		inLine(2, 6.0, true),  // 1.0 s, and stays
		inLine(3, 4.0, false), // told before the zero
		inLine(4, 0, false),   // never heard
		inLine(15, 16, false), // joined after the zero: not in line then
	}
	res := &Result{LastUnitAt: 4.8}
	s.soldOutNews(res, shoppers, zeroMoments{first: at(5), last: at(6.2), returned: at(5.9)})
	n := res.SoldOutNews
	if n == nil {
		t.Fatal("no news measured")
	}
	switch {
	case !near(n.ZeroAtS, 5) || !near(n.LastZeroAtS, 6.2) || !near(n.ReturnedTailS, 1.2):
		t.Errorf("zeros at %.2f and %.2f s, returned units %.2f s; want 5, 6.2, 1.2", n.ZeroAtS, n.LastZeroAtS, n.ReturnedTailS)
	case !near(n.CDNS, 0.2):
		t.Errorf("to the CDN %.2f s, want 0.2", n.CDNS)
	case n.Page.Count != 2 || !near(n.Page.Max, 1.0):
		t.Errorf("to the pages %+v, want 2 shoppers, 0.5 and 1.0 s", n.Page)
	case n.ToldBefore != 1 || n.Missed != 1:
		t.Errorf("told before %d, missed %d; want 1 and 1", n.ToldBefore, n.Missed)
	case !near(n.ReturnedAtS, 5.9) || !near(n.ReturnShownS, 0.2) || n.Reopened:
		t.Errorf("returned at %.2f s, shown after %.2f s, reopened %v; want 5.9, 0.2, no", n.ReturnedAtS, n.ReturnShownS, n.Reopened)
	case n.PageReads != 100:
		t.Errorf("page reads %d, want 100", n.PageReads)
	case n.Pipeline.Count != 0 || !near(n.CDNLastS, 0.1):
		t.Errorf("from the last zero at 6.2: pipeline %+v, CDN %.2f s; want no one in line untold, 0.1 s", n.Pipeline, n.CDNLastS)
	}
	// In line: 5.5-1 + 20-2 (stays) + 4-3 + 20-4 (no fate) + 16-15 = 40.5 shopper-seconds.
	if !near(n.PageReadsPerS, 100/40.5) {
		t.Errorf("page reads per shopper-second %.3f, want %.3f", n.PageReadsPerS, 100/40.5)
	}

	// A unit that came back and went again before the CDN showed it: the
	// page was told "sold out for now" for as long as it was there.
	c.changes = []flagChange{{at(5.2), true}}
	res = &Result{LastUnitAt: 4.8}
	s.soldOutNews(res, shoppers, zeroMoments{first: at(5), last: at(6.3), returned: at(6.0)})
	if n := res.SoldOutNews; !near(n.ReturnShownS, 0.3) || !near(n.CDNS, 0.2) {
		t.Errorf("unit back at 6.0, gone at 6.3, never shown: shown after %.2f s, CDN %.2f; want 0.3, 0.2", n.ReturnShownS, n.CDNS)
	}

	// A unit that came back after the last zero, shown at 12.0 s, and one
	// the CDN never showed before the run ended.
	c.changes = []flagChange{{at(5.2), true}, {at(12.0), false}}
	res = &Result{LastUnitAt: 4.8}
	s.soldOutNews(res, shoppers, zeroMoments{first: at(5), last: at(5), returned: at(11.5)})
	if n := res.SoldOutNews; !n.Reopened || !near(n.ReturnShownS, 0.5) || n.Page.Count != 2 || n.Pipeline.Count != 2 || !near(n.Pipeline.Max, 1.0) {
		t.Errorf("unit back at 11.5 after the last zero at 5, shown at 12: %+v; want reopened, shown after 0.5 s, 2 timed from both zeros", n)
	}
	c.changes = []flagChange{{at(5.2), true}}
	res = &Result{LastUnitAt: 4.8}
	s.soldOutNews(res, shoppers, zeroMoments{first: at(5), last: at(5), returned: at(11.5)})
	if n := res.SoldOutNews; !n.Reopened || n.ReturnShownS != -1 {
		t.Errorf("unit back at 11.5, never shown: %+v; want reopened, shown -1", n)
	}

	res = &Result{LastUnitAt: 4.8}
	s.soldOutNews(res, shoppers, zeroMoments{})
	if res.SoldOutNews != nil || len(res.Notes) != 1 {
		t.Errorf("no zero in the ledger: news %+v, notes %q; want none and a note", res.SoldOutNews, res.Notes)
	}
}
