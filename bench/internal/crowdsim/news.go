package crowdsim

import (
	"fmt"
	"time"
)

// SoldOutNews is how the sale's sold-out reached the line, timed from the
// source: the moments the origin's stock count reached zero, as the
// reserve script recorded them in Redis (the ledger's first_zero_at and
// last_zero_at). The last unit's 201 (LastUnitAt) is not that moment:
// holds that ran out before it had put units back on sale.
type SoldOutNews struct {
	// ZeroAtS is when the count first reached zero, seconds since the
	// run's zero: the sale sold out then, and the news is timed from it.
	// LastZeroAtS is when it last did: in between, holds ran out or
	// payments failed and their units went again, each a moment above
	// zero. ReturnedTailS is LastZeroAtS - ZeroAtS.
	ZeroAtS       float64 `json:"zero_at_s"`
	LastZeroAtS   float64 `json:"last_zero_at_s"`
	ReturnedTailS float64 `json:"returned_tail_s"`
	// CDNS is from ZeroAtS to the CDN first holding a snapshot that says
	// sold out: the edge's refresh from the origin and the CDN's max-age,
	// the pipeline up to the pages (-1: it never did).
	CDNS float64 `json:"cdn_s"`
	// Page is from ZeroAtS to each shopper in line then — joined, holding
	// nothing, not told sold out before — hearing it, from the snapshot
	// or a poll: the returned units' tail and the pipeline together.
	Page Dist `json:"page"`
	// Pipeline is the news pipeline alone, from LastZeroAtS, when the
	// count went to zero for good, to each shopper in line then and not
	// yet told hearing it (the page's refresh included); CDNLastS is from
	// LastZeroAtS to the CDN holding a snapshot that says sold out (-1:
	// it never did). Empty when everyone in line had been told before.
	Pipeline Dist    `json:"pipeline"`
	CDNLastS float64 `json:"cdn_last_s"`
	// ToldBefore are the shoppers in line at ZeroAtS who had been told
	// "sold out" before it (never, when the edge tells the truth); Missed
	// those in line who never heard it before the run ended.
	ToldBefore int `json:"told_before"`
	Missed     int `json:"missed"`
	// ReturnedAtS is when a unit last came back to a count at zero (the
	// ledger's returned_at; 0: none did). ReturnShownS is how long until
	// the CDN held a snapshot saying available again, or the count went
	// back to zero, whichever came first: how long a page kept being told
	// "sold out for now" while a unit was there, before its own refresh
	// (-1: not shown before the run ended). Reopened: that unit came back
	// after the last zero, and the count was not at zero at the end.
	ReturnedAtS  float64 `json:"returned_at_s,omitempty"`
	ReturnShownS float64 `json:"return_shown_s,omitempty"`
	Reopened     bool    `json:"reopened,omitempty"`
	// PageReads are the snapshot reads the shoppers' pages made through
	// the CDN (served, missed, and the re-reads counted but not made), and
	// per second a shopper spent between its place in line and its fate:
	// what the CDN carries for a waiting page.
	PageReads     int64   `json:"page_reads"`
	PageReadsPerS float64 `json:"page_reads_per_s"`
}

// zeroMoments are the ledger's record of the stock count: when it first
// and last reached zero, and when a unit last came back to it (each zero
// when it did not happen).
type zeroMoments struct {
	first, last, returned time.Time
}

// flagChange is a moment the CDN took in a snapshot whose sold_out
// differed from the one before it.
type flagChange struct {
	at      time.Time
	soldOut bool
}

// soldOutNews measures how the sold-out reached the line, from the
// ledger's record of the count.
func (s *sim) soldOutNews(res *Result, shoppers []*shopper, m zeroMoments) {
	if m.first.IsZero() {
		if res.LastUnitAt > 0 {
			res.Notes = append(res.Notes, "The ledger has no moment the stock count reached zero (Redis lost it, or the sale was rebuilt), so the sold-out news was not timed.")
		}
		return
	}
	at := m.first.Sub(s.zero)
	last := m.last.Sub(s.zero)
	n := &SoldOutNews{ZeroAtS: at.Seconds(), LastZeroAtS: last.Seconds(), ReturnedTailS: m.last.Sub(m.first).Seconds(), CDNS: -1, CDNLastS: -1}
	if first, ok := s.cdn.firstChange(m.first, true); ok {
		n.CDNS = first.Sub(m.first).Seconds()
	}
	if shown, ok := s.cdn.shownAt(m.last, true); ok {
		n.CDNLastS = shown.Sub(m.last).Seconds()
	}
	if !m.returned.IsZero() {
		n.ReturnedAtS, n.Reopened = m.returned.Sub(s.zero).Seconds(), m.returned.After(m.last)
		shown, ok := s.cdn.firstChange(m.returned, false)
		switch {
		case !n.Reopened && (!ok || shown.After(m.last)):
			shown, ok = m.last, true // taken again before the CDN showed it
		case n.Reopened && ok && shown.Sub(s.zero) > s.ended:
			ok = false
		}
		n.ReturnShownS = -1
		if ok {
			n.ReturnShownS = shown.Sub(m.returned).Seconds()
		}
	}
	var delays, pipeline []float64
	var inLine time.Duration
	for _, sh := range shoppers {
		if d, ok, _ := soldOutDelay(sh, last); ok {
			pipeline = append(pipeline, d)
		}
		switch d, ok, waiting := soldOutDelay(sh, at); {
		case ok:
			delays = append(delays, d)
		case waiting:
			n.Missed++
		case sh.joined && sh.joinAnswered <= at && sh.heardSoldOut && sh.soldOutAt < at:
			n.ToldBefore++
		}
		if sh.joined {
			end := s.ended
			if sh.fate != fateNone && !(sh.fate == fateSoldOut && sh.stays) {
				end = min(end, sh.fateAt)
			}
			inLine += max(end-sh.joinAnswered, 0)
		}
	}
	n.Page, n.Pipeline = dist(delays), dist(pipeline)
	for _, c := range []*cdn{s.cdn, s.farCDN} {
		if c != nil {
			n.PageReads += c.hits.Load() + c.misses.Load() + c.unchanged.Load()
		}
	}
	if inLine > 0 {
		n.PageReadsPerS = float64(n.PageReads) / inLine.Seconds()
	}
	if n.Missed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d shoppers in line when the stock count first reached zero never heard \"sold out\" before the run ended (left, or ran out of retries).", n.Missed))
	}
	res.SoldOutNews = n
}
