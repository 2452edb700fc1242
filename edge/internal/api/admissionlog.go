package api

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// logKeyLabel names the key the admission log's salt is made with
// (tokens.KeySet.DerivedKeys of the active key): every node holding the
// same active key makes the same salt, and nobody without it can make it
// before the log reveals it.
const logKeyLabel = "admission-log"

// logWindow is how many places of the line one read of the places hash
// sorts in memory (about 25 MB): a longer line is read once per window,
// each read a whole HSCAN of the hash, and streamed window by window.
const logWindow = 1 << 19

// logSettle is how long after a sale's end its log is cached only briefly
// (logSettlingCache): a join taken just before the end may still be on its
// way to Redis. After it the log does not change (logFinalCache).
const logSettle = time.Minute

// logStepsBudget bounds the read of a sale's admission steps: up to
// admission.MaxSteps, in pages.
const logStepsBudget = 30 * time.Second

// logTimeFormat is reached_at's: RFC 3339 in UTC, to the millisecond.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// logWriteTimeout bounds the writing of one log to its reader, in place of
// the server's WriteTimeout (10 s), which would cut a long line's log (a
// line of 700,000 places is some 71 MB) or a slow reader's.
const logWriteTimeout = 5 * time.Minute

// The bounds of the logs a node keeps (logCache): a log of at most
// logKeepBytes is built in memory, served to every reader from there, and
// kept — a settling log for logSettlingMaxAge, a final one until logs
// served more recently need the room under logKeepTotalBytes, all sales
// together. A longer log is streamed as it is read, to one reader at a
// time, and built again for the next. 32 MiB is a line of some 300,000
// places, and the edge's pod has 512 MiB.
const (
	logKeepBytes      = 32 << 20
	logKeepTotalBytes = 64 << 20
	logSettlingMaxAge = 5 * time.Second // logSettlingCache's max-age
)

// logWait is how long a request for a log waits for the build of it under
// way for another reader before it is answered errLogBusy.
const logWait = 5 * time.Second

// logRowMinBytes is the least an entry takes as appendRow writes it, with
// the separator before it: a later join without reached_at at place 1.
const logRowMinBytes = len(",\n{\"account_sha256\":\"\",\"place\":1}") + 2*sha256.Size

// codeSaleNotOver: the admission log asked for before the sale's end.
const codeSaleNotOver = "sale_not_over"

var errSaleNotOver = httpapi.New(fasthttp.StatusConflict, codeSaleNotOver,
	"The sale has not ended; its admission log is published at its end.")

// errLogBusy: this node is building the log for another reader, for longer
// than logWait.
var errLogBusy = &httpapi.Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       httpapi.CodePleaseWait,
	Message:    "The admission log is being prepared for another reader; please try again in a moment.",
	RetryAfter: 10,
}

// The admission log's Cache-Control values.
var (
	logFinalCache    = []byte("public, max-age=86400")
	logSettlingCache = []byte("public, max-age=5")
)

// logHead is the admission log but its entries (docs/API.md).
type logHead struct {
	SaleID    string       `json:"sale_id"`
	StartsAt  time.Time    `json:"starts_at"`
	EndsAt    time.Time    `json:"ends_at"`
	Draw      logDraw      `json:"draw"`
	Salt      string       `json:"salt"` // hex; account_sha256 is SHA-256(salt bytes ‖ account)
	Admission logAdmission `json:"admission"`
}

type logDraw struct {
	Algorithm  string `json:"algorithm"`
	Seed       string `json:"seed"`
	SeedSHA256 string `json:"seed_sha256"`
	PreQueue   int64  `json:"pre_queue"`
}

// logAdmission is what the log says of the admission cursor's moves: when
// it reached places, not who was admitted (admission.Reached).
type logAdmission struct {
	ReachedThrough int64 `json:"reached_through"` // the last place the cursor reached before the end
	Steps          int   `json:"steps"`           // the cursor's moves recorded before the end
	StepsCapped    bool  `json:"steps_capped"`    // admission.MaxSteps moves were recorded: later ones were not
}

// admissionLog: GET /v1/sales/{sale}/admission-log, once the sale has
// ended (409 sale_not_over before): every place handed out in its line,
// by place, with the draw's seed and when the admission cursor reached
// each place, for anyone to check that the pre-queue was drawn as
// committed and the cursor went through the places in order
// (docs/FAIRNESS.md, flashgate-verify). Accounts appear as SHA-256(salt ‖
// account) under a per-sale salt made from the token keys and revealed
// here. A node builds a sale's log once at a time and keeps what it can
// (logCache). A Redis failure before the body starts answers please_wait,
// and one while a line longer than logWindow streams drops the
// connection, so that nobody takes a cut log for whole.
func (s *Server) admissionLog(ctx *fasthttp.RequestCtx, params []string) error {
	v, err := s.Admission.View(params[0])
	if err != nil {
		return err
	}
	now := s.Clock.Now()
	if now.Before(v.Sale.EndsAt) {
		return errSaleNotOver
	}
	return s.logs.serve(ctx, v.Sale.SaleID, v.Sale.EndsAt, now, s.Log, func() (*logBuilder, []byte, error) {
		return s.buildLog(v, now)
	})
}

// buildLog reads the first window of the line of v's sale and the
// cursor's moves, and encodes the log's head.
func (s *Server) buildLog(v *admission.View, now time.Time) (*logBuilder, []byte, error) {
	if !v.Fresh(now) {
		return nil, nil, admission.ErrCursorStale
	}
	seed, n, drawn := v.Draw()
	if !drawn {
		return nil, nil, admission.ErrNotReady // the draw is sealed a tick after the start
	}
	sale := v.Sale.SaleID
	c, cancel := context.WithTimeout(context.Background(), logStepsBudget)
	reached, err := s.Admission.Reached(c, sale, v.Sale.EndsAt)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	mac := hmac.New(sha256.New, s.Issuer.DerivedKey(logKeyLabel))
	mac.Write([]byte(sale))
	b := &logBuilder{sale: sale, scan: s.Admission.ScanPlaces, budget: s.budget, window: logWindow,
		salt: mac.Sum(nil), draw: line.NewShuffle(seed, n), reached: reached}
	if err := b.read(1, v.State.QueueLength); err != nil {
		return nil, nil, err
	}
	head, err := json.Marshal(logHead{
		SaleID: sale, StartsAt: v.Sale.StartsAt, EndsAt: v.Sale.EndsAt,
		Draw:      logDraw{Algorithm: line.ShuffleAlgorithm, Seed: hex.EncodeToString(seed), SeedSHA256: line.SeedHash(seed), PreQueue: n},
		Salt:      hex.EncodeToString(b.salt),
		Admission: logAdmission{ReachedThrough: reached.Through(), Steps: reached.Steps, StepsCapped: reached.Capped},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("encode the admission log of sale %s: %w", sale, err)
	}
	return b, head, nil
}

// logCache holds the admission logs this node has built, by sale, and
// lets one build of a sale's log run at a time: a build reads the whole
// places hash, and a log changes no more once the settling minute after
// the sale's end is over. The CDN in front keeps each log too
// (deploy/cdn), so a node sees few requests for one. Its zero value is
// ready; the fields before mu are tests' (zero: the log* defaults).
type logCache struct {
	keepBytes  int           // logKeepBytes
	totalBytes int           // logKeepTotalBytes
	wait       time.Duration // logWait

	mu    sync.Mutex // guards sales, kept and uses
	sales map[string]*logEntry
	kept  int    // the bytes of the bodies in sales
	uses  uint64 // counts the bodies served, to order logEntry.used
}

// logEntry is one sale's log on this node: the build under way, the body
// kept, or both (the body then is a settling one, built again).
type logEntry struct {
	building chan struct{} // closed when the build under way ends; nil: none is
	body     []byte        // the log, whole; nil: none kept
	endsAt   time.Time     // the sale's end the body was built for
	final    bool          // built after the settling minute: good for ever
	until    time.Time     // when a settling body stops serving
	used     uint64        // logCache.uses when the body was last served
}

// serve answers the log of sale, which ends at endsAt, at now: the body
// kept when there is one for that end that still serves, else one built
// by build — by this request, or by the build under way for another,
// waited for up to the cache's wait (errLogBusy after it).
func (c *logCache) serve(ctx *fasthttp.RequestCtx, sale string, endsAt, now time.Time, log *slog.Logger,
	build func() (*logBuilder, []byte, error)) error {
	final := !now.Before(endsAt.Add(logSettle))
	var timeout <-chan time.Time
	for {
		body, bodyFinal, wait := c.take(sale, endsAt, now)
		switch {
		case body != nil:
			writeLog(ctx, body, bodyFinal)
			return nil
		case wait == nil: // this request builds
			return c.build(ctx, sale, endsAt, now, final, log, build)
		}
		if timeout == nil {
			t := time.NewTimer(c.waitFor())
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wait:
		case <-timeout:
			return errLogBusy
		}
	}
}

// take is sale's body kept for endsAt, if it serves at now; else, when
// another request is building the log, the channel its end closes; else
// nothing, and the caller is to build it (and then call done).
func (c *logCache) take(sale string, endsAt, now time.Time) (body []byte, final bool, wait <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sales == nil {
		c.sales = map[string]*logEntry{}
	}
	e := c.sales[sale]
	if e == nil {
		e = &logEntry{}
		c.sales[sale] = e
	}
	if e.body != nil && (!e.endsAt.Equal(endsAt) || !e.final && !now.Before(e.until)) {
		c.drop(e)
	}
	switch {
	case e.body != nil:
		c.uses++
		e.used = c.uses
		return e.body, e.final, nil
	case e.building != nil:
		return nil, false, e.building
	}
	e.building = make(chan struct{})
	return nil, false, nil
}

// build builds sale's log, as the one request doing so, and answers it: a
// log that fits keepBytes from memory, kept for the next readers, the
// build over before the first byte is sent; a longer one streamed as it is
// read, the build over only when the stream is, so that one reader at a
// time holds a window of the line.
func (c *logCache) build(ctx *fasthttp.RequestCtx, sale string, endsAt, now time.Time, final bool, log *slog.Logger,
	build func() (*logBuilder, []byte, error)) error {
	b, head, err := build()
	if err != nil {
		c.done(sale, nil, endsAt, final, now)
		return err
	}
	if body, ok := b.render(head, c.keepFor()); ok {
		c.done(sale, body, endsAt, final, now)
		writeLog(ctx, body, final)
		return nil
	}
	logHeaders(ctx, final)
	// The server's WriteTimeout is set once the handler returns; a
	// deadline of the handler's own replaces it for this answer only.
	_ = ctx.SetWriteDeadline(time.Now().Add(logWriteTimeout))
	conn := ctx.Conn()
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		// fasthttp runs this at once, and closes the stream when the
		// answer cannot be written, which ends it: done always runs.
		defer c.done(sale, nil, endsAt, final, now)
		if err := b.write(w, head); err != nil {
			log.Warn("admission log cut short", "sale", sale, "err", err)
			_ = conn.Close() // the client sees a broken answer, not a short log
		}
	})
	return nil
}

// done ends the build of sale's log under way, keeping body (nil: none)
// when it fits: a final one for good, a settling one logSettlingMaxAge
// from now. To make room it drops the bodies served least recently.
func (c *logCache) done(sale string, body []byte, endsAt time.Time, final bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.sales[sale]
	close(e.building)
	e.building = nil
	if body != nil && len(body) <= c.keepFor() {
		c.drop(e)
		for c.kept+len(body) > c.totalFor() {
			var oldest *logEntry
			for _, o := range c.sales {
				if o.body != nil && (oldest == nil || o.used < oldest.used) {
					oldest = o
				}
			}
			if oldest == nil {
				break
			}
			c.drop(oldest)
		}
		c.uses++
		e.body, e.endsAt, e.final, e.until, e.used = body, endsAt, final, now.Add(logSettlingMaxAge), c.uses
		c.kept += len(body)
	}
	for s, o := range c.sales {
		if o.body == nil && o.building == nil {
			delete(c.sales, s)
		}
	}
}

// drop lets go of e's body; c.mu is held.
func (c *logCache) drop(e *logEntry) {
	c.kept -= len(e.body)
	e.body = nil
}

func (c *logCache) keepFor() int {
	if c.keepBytes > 0 {
		return c.keepBytes
	}
	return logKeepBytes
}

func (c *logCache) totalFor() int {
	if c.totalBytes > 0 {
		return c.totalBytes
	}
	return logKeepTotalBytes
}

func (c *logCache) waitFor() time.Duration {
	if c.wait > 0 {
		return c.wait
	}
	return logWait
}

// logHeaders sets the log's headers but its length: cached by the CDN for
// a day once final, for seconds while settling.
func logHeaders(ctx *fasthttp.RequestCtx, final bool) {
	h := &ctx.Response.Header
	if final {
		h.SetCanonical(httpapi.HeaderCacheControl, logFinalCache)
	} else {
		h.SetCanonical(httpapi.HeaderCacheControl, logSettlingCache)
	}
	h.SetCanonical(httpapi.HeaderContentTypeOptions, []byte("nosniff"))
	ctx.SetContentType("application/json")
}

// writeLog answers a whole log from memory, which it does not copy, with
// the log's own write deadline.
func writeLog(ctx *fasthttp.RequestCtx, body []byte, final bool) {
	logHeaders(ctx, final)
	_ = ctx.SetWriteDeadline(time.Now().Add(logWriteTimeout)) // as in logCache.build
	ctx.Response.SetBodyRaw(body)
}

// logBuilder reads a sale's places for its admission log, window places at
// a time, and writes the log. It is used by one goroutine at a time.
type logBuilder struct {
	sale    string
	scan    func(ctx context.Context, sale string, cursor uint64, fn func(account string, p line.Place)) (uint64, error)
	budget  func() (context.Context, context.CancelFunc) // of one HSCAN
	window  int64
	salt    []byte
	draw    line.Shuffle
	reached admission.Reached

	lo     int64    // the first place of the window read
	slots  []logRow // the window's places, by place - lo; place 0: nobody's
	extra  []logRow // a second account at a place of the window (never in a sound line)
	strays []logRow // pre-queue joins outside the draw, at place 0 (never in a sound line)
	top    int64    // the highest place in the line
	buf    []byte   // scratch: a hash's input, a row's JSON
}

// logRow is one entry of the log.
type logRow struct {
	place   int64
	pre     bool  // a pre-queue join
	index   int64 // its pre-queue index
	account [sha256.Size]byte
}

// read reads the places lo..lo+window-1 from the places hash; the first
// read (lo 1) also finds the highest place and the strays. hint is the
// line's length as last read (0: unknown), to size the window.
func (b *logBuilder) read(lo, hint int64) error {
	clear(b.slots)
	b.lo, b.slots, b.extra = lo, b.slots[:0], b.extra[:0]
	if cap(b.slots) == 0 {
		b.slots = make([]logRow, 0, min(max(hint, 0), b.window))
	}
	var cursor uint64
	for {
		c, cancel := b.budget()
		next, err := b.scan(c, b.sale, cursor, b.take)
		cancel()
		if err != nil {
			return err
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// take keeps one account's place when it is in the window read.
func (b *logBuilder) take(account string, p line.Place) {
	place := p.Position
	if p.Pre {
		var err error
		if place, err = b.draw.Position(p.Index); err != nil {
			place = 0
		}
	}
	if place < 1 {
		place = 0
	}
	b.top = max(b.top, place)
	inWindow := place >= b.lo && place < b.lo+b.window
	if !inWindow && (place != 0 || b.lo != 1) {
		return
	}
	b.buf = append(append(b.buf[:0], b.salt...), account...)
	row := logRow{place: place, pre: p.Pre, account: sha256.Sum256(b.buf)}
	if p.Pre {
		row.index = p.Index
	}
	if place == 0 {
		b.strays = appendNew(b.strays, row)
		return
	}
	i := int(place - b.lo)
	if i >= len(b.slots) {
		b.slots = slices.Grow(b.slots, i+1-len(b.slots))[:i+1]
	}
	switch slot := &b.slots[i]; {
	case slot.place == 0:
		*slot = row
	case *slot != row: // a scan may give an account twice; two accounts here, never
		b.extra = appendNew(b.extra, row)
	}
}

// appendNew appends row unless rows has it.
func appendNew(rows []logRow, row logRow) []logRow {
	if slices.Contains(rows, row) {
		return rows
	}
	return append(rows, row)
}

// render writes the whole log into memory, when the first read took the
// whole line and the log comes to at most limit bytes; false otherwise,
// the builder left as it was, to stream.
func (b *logBuilder) render(head []byte, limit int) ([]byte, bool) {
	if b.lo+b.window <= b.top {
		return nil, false // more windows to read, while the log streams
	}
	rows := len(b.strays) + len(b.extra)
	for _, r := range b.slots {
		if r.place != 0 {
			rows++
		}
	}
	least := len(head) + rows*logRowMinBytes
	if least > limit {
		return nil, false
	}
	w := &capWriter{buf: make([]byte, 0, min(limit, least+least/4)), limit: limit}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := b.write(bw, head); err != nil || bw.Flush() != nil || w.over {
		return nil, false
	}
	if cap(w.buf)-len(w.buf) > len(w.buf)/4 {
		return bytes.Clone(w.buf), true // not to keep the slack of append's growth
	}
	return w.buf, true
}

// errLogTooLong: a log past the bound of those kept in memory.
var errLogTooLong = errors.New("the admission log is longer than a log kept in memory")

// capWriter collects what is written, up to limit bytes; past them every
// write fails.
type capWriter struct {
	buf   []byte
	limit int
	over  bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.over || len(w.buf)+len(p) > w.limit {
		w.over = true
		return 0, errLogTooLong
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// write writes the log: head (its JSON object but the entries), then the
// entries by place, reading window after window. It returns an error
// only when a read fails; it stops quietly when the client has gone.
func (b *logBuilder) write(w *bufio.Writer, head []byte) error {
	_, _ = w.Write(head[:len(head)-1])
	_, _ = w.WriteString(`,"entries":[`)
	first := true
	emit := func(r logRow) error {
		b.buf = b.buf[:0]
		if !first {
			b.buf = append(b.buf, ',')
		}
		first = false
		b.buf = b.appendRow(append(b.buf, '\n'), r)
		_, err := w.Write(b.buf)
		return err
	}
	for _, r := range b.strays {
		if emit(r) != nil {
			return nil
		}
	}
	for {
		slices.SortFunc(b.extra, func(x, y logRow) int { return cmp.Compare(x.place, y.place) })
		k := 0
		for _, r := range b.slots {
			if r.place == 0 {
				continue
			}
			if emit(r) != nil {
				return nil
			}
			for ; k < len(b.extra) && b.extra[k].place == r.place; k++ {
				if emit(b.extra[k]) != nil {
					return nil
				}
			}
		}
		next := b.lo + b.window
		if next > b.top {
			break
		}
		if err := w.Flush(); err != nil {
			return nil
		}
		if err := b.read(next, 0); err != nil {
			return err
		}
	}
	_, _ = w.WriteString("\n]}\n")
	return nil
}

// appendRow appends r as the log's JSON.
func (b *logBuilder) appendRow(dst []byte, r logRow) []byte {
	dst = append(dst, `{"account_sha256":"`...)
	dst = hex.AppendEncode(dst, r.account[:])
	dst = append(dst, '"')
	if r.pre {
		dst = append(dst, `,"pre_index":`...)
		dst = strconv.AppendInt(dst, r.index, 10)
	}
	dst = append(dst, `,"place":`...)
	dst = strconv.AppendInt(dst, r.place, 10)
	if at, ok := b.reached.At(r.place); ok {
		dst = append(dst, `,"reached_at":"`...)
		dst = at.UTC().AppendFormat(dst, logTimeFormat)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}
