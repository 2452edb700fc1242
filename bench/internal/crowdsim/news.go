package crowdsim

import (
	"fmt"
	"time"
)

// SoldOutNews is how the sale's sold-out reached the line, timed from the
// source: the moment the origin's stock count last reached zero, as the
// reserve script recorded it in Redis (the ledger's last_zero_at). The
// stock's first zero (LastUnitAt) is not that moment: holds run out and
// payments fail, and those units go back on sale first.
type SoldOutNews struct {
	// ZeroAtS is when the count last reached zero, seconds since the
	// run's zero; ReturnedTailS is ZeroAtS - LastUnitAt, how long units
	// that came back kept the sale open after the stock first went.
	ZeroAtS       float64 `json:"zero_at_s"`
	ReturnedTailS float64 `json:"returned_tail_s"`
	// CDNS is from ZeroAtS to the CDN first holding a snapshot that says
	// sold out: the edge's refresh from the origin and the CDN's max-age,
	// the pipeline up to the pages (-1: it never did).
	CDNS float64 `json:"cdn_s"`
	// Page is from ZeroAtS to each shopper in line then — joined, holding
	// nothing, not told sold out before — hearing it, from the snapshot
	// or a poll: the whole pipeline, the page's refresh included.
	Page Dist `json:"page"`
	// ToldBefore are the shoppers in line at ZeroAtS who had been told
	// "sold out for now" at an earlier zero and stayed; Missed those in
	// line who never heard it before the run ended.
	ToldBefore int `json:"told_before"`
	Missed     int `json:"missed"`
	// ReturnedAtS is when a unit last came back to a count at zero (the
	// ledger's returned_at; 0: none did). ReturnShownS is how long until
	// the CDN held a snapshot saying available again, or the count went
	// back to zero, whichever came first: how long a page kept being told
	// "sold out for now" while a unit was there, before its own refresh
	// (-1: not shown before the run ended). Reopened: that unit came back
	// after ZeroAtS, and the count was not at zero at the end.
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

// flagChange is a moment the CDN took in a snapshot whose sold_out
// differed from the one before it.
type flagChange struct {
	at      time.Time
	soldOut bool
}

// soldOutNews measures how the sold-out reached the line, from zero and
// returned (the ledger's last_zero_at and returned_at; zero when absent).
func (s *sim) soldOutNews(res *Result, shoppers []*shopper, zero, returned time.Time) {
	if zero.IsZero() {
		if res.LastUnitAt > 0 {
			res.Notes = append(res.Notes, "The ledger has no moment the stock count reached zero (Redis lost it, or the sale was rebuilt), so the sold-out news was not timed.")
		}
		return
	}
	at := zero.Sub(s.zero)
	n := &SoldOutNews{ZeroAtS: at.Seconds(), CDNS: -1}
	if res.LastUnitAt > 0 {
		n.ReturnedTailS = n.ZeroAtS - res.LastUnitAt
	}
	if first, ok := s.cdn.firstChange(zero, true); ok {
		n.CDNS = first.Sub(zero).Seconds()
	}
	if !returned.IsZero() {
		n.ReturnedAtS, n.Reopened = returned.Sub(s.zero).Seconds(), returned.After(zero)
		shown, ok := s.cdn.firstChange(returned, false)
		switch {
		case !n.Reopened && (!ok || shown.After(zero)):
			shown, ok = zero, true // taken again before the CDN showed it
		case n.Reopened && ok && shown.Sub(s.zero) > s.ended:
			ok = false
		}
		n.ReturnShownS = -1
		if ok {
			n.ReturnShownS = shown.Sub(returned).Seconds()
		}
	}
	var delays []float64
	var inLine time.Duration
	for _, sh := range shoppers {
		switch d, ok, waiting := soldOutDelay(sh, at); {
		case ok:
			delays = append(delays, d)
		case waiting:
			n.Missed++
		case sh.joined && sh.joinAnswered <= at && sh.heardSoldOut && sh.soldOutAt < at && sh.stays && sh.fate == fateSoldOut:
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
	n.Page = dist(delays)
	for _, c := range []*cdn{s.cdn, s.farCDN} {
		if c != nil {
			n.PageReads += c.hits.Load() + c.misses.Load() + c.unchanged.Load()
		}
	}
	if inLine > 0 {
		n.PageReadsPerS = float64(n.PageReads) / inLine.Seconds()
	}
	if n.Missed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d shoppers in line when the stock count reached zero for good never heard \"sold out\" before the run ended (left, or ran out of retries).", n.Missed))
	}
	res.SoldOutNews = n
}
