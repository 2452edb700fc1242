package pagetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/flashgate/flashgate/internal/testenv"
)

// hungBudget bounds everything the browser does in TestHungRequestAskedAgain.
const hungBudget = 60 * time.Second

// TestHungRequestAskedAgain: a request that never answers (a half-dead
// connection, a stalled proxy) does not stop the page. A shopper waits in
// line with admission paused; the page's next request about the sale (a
// read of the sale's snapshot, which tells it its turn) is left without an
// answer. The page gives it up after its request timeout, asks again, and
// is admitted once ops resume admission, in the same document.
func TestHungRequestAskedAgain(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), hungBudget)
	defer cancel()
	browser := startBrowser(t, ctx)
	const sale, account, sku = "page-hung", "hung-ivy", "sku-1"
	def := s.openSale(t, sale, 2)
	s.admission(t, sale, `{"rate_per_s": 0.01, "paused": true}`)
	p := waitInLine(t, s, browser, def, account, "#1")

	// The first request about the sale after this is held, unanswered; the
	// later ones go through.
	var asked atomic.Int64
	var heldAt atomic.Int64 // when the held request came, in Unix nanoseconds
	intercept(t, p, "*/v1/sales/"+sale+"*", "the page's requests about the sale", func(e *fetch.EventRequestPaused) {
		if asked.Add(1) == 1 {
			heldAt.Store(time.Now().UnixNano())
			return // never continued: the request hangs
		}
		_, _ = chromedp.Call(p.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
	})
	testenv.Eventually(t, 10*time.Second, "a request about the sale after joining", func() bool { return asked.Load() >= 1 })
	testenv.Eventually(t, requestTimeout+10*time.Second, "the page asking again after a request that never answered",
		func() bool { return asked.Load() >= 2 })
	t.Logf("the page asked again %v after the request it was left waiting on",
		time.Since(time.Unix(0, heldAt.Load())).Round(100*time.Millisecond))

	s.admission(t, sale, `{"rate_per_s": 1000, "paused": false}`)
	p.waitUntil("admission after the hung request", `!!document.getElementById('buy-`+sku+`') && !document.getElementById('buy').hidden`, 15*time.Second)
	checkSameDocument(t, p)
}

// requestTimeout is how long static/app.js waits for an answer (its
// REQUEST_TIMEOUT_MS) before it counts the request as a network problem.
const requestTimeout = 10 * time.Second
