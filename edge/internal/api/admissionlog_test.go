package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/internal/testenv"
)

// fakePlaces is a places hash read in batches of three, each account as
// often as listed (a scan may give one twice), each batch delay late;
// failFrom makes every scan from that read on fail (0: none).
type fakePlaces struct {
	accounts []string
	places   []line.Place
	delay    time.Duration
	failFrom int64
	reads    atomic.Int64 // scans begun from cursor 0
}

func (f *fakePlaces) scan(_ context.Context, _ string, cursor uint64, fn func(string, line.Place)) (uint64, error) {
	if cursor == 0 {
		f.reads.Add(1)
	}
	time.Sleep(f.delay)
	if f.failFrom > 0 && f.reads.Load() >= f.failFrom {
		return 0, errors.New("redis: connection refused")
	}
	end := min(int(cursor)+3, len(f.accounts))
	for i := int(cursor); i < end; i++ {
		fn(f.accounts[i], f.places[i])
	}
	if end == len(f.accounts) {
		return 0, nil
	}
	return uint64(end), nil
}

type logEntryJSON struct {
	AccountSHA256 string  `json:"account_sha256"`
	PreIndex      *int64  `json:"pre_index"`
	Place         int64   `json:"place"`
	ReachedAt     *string `json:"reached_at"`
}

// TestLogBuilderSortsByPlaceWindowByWindow: the log lists every place
// once, by place, however many windows the line takes and however the
// scan orders and repeats accounts; a pre-queue join out of the draw is
// listed first at place 0 rather than dropped; a second account at a
// taken place is listed beside the first.
func TestLogBuilderSortsByPlaceWindowByWindow(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	const pre, later = 7, 6
	draw := line.NewShuffle(seed, pre)
	f := &fakePlaces{}
	add := func(a string, p line.Place) { f.accounts, f.places = append(f.accounts, a), append(f.places, p) }
	for i := pre + later; i >= 1; i-- { // the scan's order is not the line's
		if i <= pre {
			add(fmt.Sprintf("early-%d", i), line.Place{Pre: true, Index: int64(i)})
		} else {
			add(fmt.Sprintf("late-%d", i), line.Place{Position: int64(i)})
		}
	}
	add("early-3", line.Place{Pre: true, Index: 3})     // given twice by the scan
	add("stray", line.Place{Pre: true, Index: pre + 1}) // outside the draw
	add("twin", line.Place{Position: pre + 2})          // a place already taken
	for _, window := range []int64{4, 5, 100} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			f.reads.Store(0)
			salt := []byte("salt")
			b := &logBuilder{sale: "s", scan: f.scan, budget: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Second)
			}, window: window, salt: salt, draw: draw}
			if err := b.read(1, 0); err != nil {
				t.Fatalf("read = %v", err)
			}
			var out bytes.Buffer
			w := bufio.NewWriter(&out)
			if err := b.write(w, []byte(`{"sale_id":"s"}`)); err != nil {
				t.Fatalf("write = %v", err)
			}
			_ = w.Flush()
			var log struct {
				SaleID  string         `json:"sale_id"`
				Entries []logEntryJSON `json:"entries"`
			}
			if err := json.Unmarshal(out.Bytes(), &log); err != nil {
				t.Fatalf("log %s: %v", out.Bytes(), err)
			}
			hash := func(a string) string {
				sum := sha256.Sum256(append(append([]byte(nil), salt...), a...))
				return hex.EncodeToString(sum[:])
			}
			type row struct {
				account string
				pre     int64 // 0: none
				place   int64
			}
			want := []row{{"stray", pre + 1, 0}}
			byPlace := map[int64]row{}
			for i := int64(1); i <= pre; i++ {
				p, _ := draw.Position(i)
				byPlace[p] = row{fmt.Sprintf("early-%d", i), i, p}
			}
			for p := int64(1); p <= pre+later; p++ {
				if r, ok := byPlace[p]; ok {
					want = append(want, r)
				} else {
					want = append(want, row{fmt.Sprintf("late-%d", p), 0, p})
				}
				if p == pre+2 {
					want = append(want, row{"twin", 0, p})
				}
			}
			if len(log.Entries) != len(want) || log.SaleID != "s" {
				t.Fatalf("log of sale %q has %d entries, want %d: %s", log.SaleID, len(log.Entries), len(want), out.Bytes())
			}
			for i, w := range want {
				e := log.Entries[i]
				var pre int64
				if e.PreIndex != nil {
					pre = *e.PreIndex
				}
				if e.AccountSHA256 != hash(w.account) || pre != w.pre || e.Place != w.place || e.ReachedAt != nil {
					t.Errorf("entry %d = %+v (pre %d), want %s's: hash %s, pre_index %d, place %d, not reached", i, e, pre, w.account, hash(w.account), w.pre, w.place)
				}
			}
			if passes := (pre + later + window - 1) / window; f.reads.Load() != passes {
				t.Errorf("the places hash was scanned %d times, want once per window of %d: %d", f.reads.Load(), window, passes)
			}
		})
	}
}

// TestLogBuilderFailsMidStream: a read that fails after the first window
// is an error of write, for the handler to drop the connection on.
func TestLogBuilderFailsMidStream(t *testing.T) {
	f := &fakePlaces{failFrom: 2}
	for i := 1; i <= 10; i++ {
		f.accounts, f.places = append(f.accounts, fmt.Sprintf("a%d", i)), append(f.places, line.Place{Position: int64(i)})
	}
	b := &logBuilder{sale: "s", scan: f.scan, budget: func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.Background())
	}, window: 4, draw: line.NewShuffle([]byte("seed"), 0)}
	if err := b.read(1, 10); err != nil {
		t.Fatalf("read = %v", err)
	}
	var out bytes.Buffer
	if err := b.write(bufio.NewWriter(&out), []byte(`{}`)); err == nil {
		t.Errorf("write with a failing second read = nil error, want the read's")
	}
}

// logEnd is when the sale of the tests below ended; logFinal a moment
// after its settling minute.
var (
	logEnd   = time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC)
	logFinal = logEnd.Add(2 * time.Minute)
)

// logLine is a line of n later joins, account-i at place i, each batch of
// its scan delay late.
func logLine(n int, delay time.Duration) *fakePlaces {
	f := &fakePlaces{delay: delay}
	for i := 1; i <= n; i++ {
		f.accounts = append(f.accounts, fmt.Sprintf("account-%d", i))
		f.places = append(f.places, line.Place{Position: int64(i)})
	}
	return f
}

// logBuilds builds the log of f's line, window places a read, as the
// handler's build does; builds counts its calls.
func logBuilds(f *fakePlaces, window int64, builds *atomic.Int64) func() (*logBuilder, []byte, error) {
	return func() (*logBuilder, []byte, error) {
		builds.Add(1)
		b := &logBuilder{sale: "s", scan: f.scan, budget: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		}, window: window, salt: []byte("salt"), draw: line.NewShuffle([]byte("seed"), 0)}
		if err := b.read(1, 0); err != nil {
			return nil, nil, err
		}
		return b, []byte(`{"sale_id":"s"}`), nil
	}
}

// logEntries is the number of entries of a whole log; it fails t on a log
// cut short.
func logEntries(t *testing.T, body []byte) int {
	t.Helper()
	var l struct {
		SaleID  string         `json:"sale_id"`
		Entries []logEntryJSON `json:"entries"`
	}
	if err := json.Unmarshal(body, &l); err != nil || l.SaleID != "s" {
		t.Fatalf("a log of %d bytes is not whole: %v (it ends %q)", len(body), err, body[max(0, len(body)-40):])
	}
	return len(l.Entries)
}

// serveLog is c.serve of the log of sale s (ended at logEnd) at now.
func serveLog(ctx *fasthttp.RequestCtx, c *logCache, sale string, now time.Time, build func() (*logBuilder, []byte, error)) error {
	return c.serve(ctx, sale, logEnd, now, slog.New(slog.DiscardHandler), build)
}

// logServer serves c's log of sale s, asked for at logFinal, through
// fasthttp's in-memory listener (its connections as TCP's: tcpLikeConn),
// from a server with writeTimeout as its WriteTimeout; errors are answered
// as the edge answers them.
func logServer(t *testing.T, c *logCache, writeTimeout time.Duration, build func() (*logBuilder, []byte, error)) *fasthttputil.InmemoryListener {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{WriteTimeout: writeTimeout, Handler: func(ctx *fasthttp.RequestCtx) {
		if err := serveLog(ctx, c, "s", logFinal, build); err != nil {
			e, _ := errorTable.Classify(err)
			httpapi.WriteError(ctx, e)
		}
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(tcpLikeListener{ln})
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.ShutdownWithContext(ctx)
		<-done
	})
	return ln
}

// tcpLikeListener hands the server tcpLikeConns.
type tcpLikeListener struct{ *fasthttputil.InmemoryListener }

func (l tcpLikeListener) Accept() (net.Conn, error) {
	c, err := l.InmemoryListener.Accept()
	if err != nil {
		return nil, err
	}
	return &tcpLikeConn{Conn: c}, nil
}

// tcpLikeConn writes as a TCP connection does, where fasthttputil's pipe
// takes any write whole and looks at the write deadline only while a
// write waits: a socket buffer's worth (tcpLikeBuffer) at a time, each
// failing once the deadline has passed.
type tcpLikeConn struct {
	net.Conn
	mu       sync.Mutex // guards deadline
	deadline time.Time
}

const tcpLikeBuffer = 4096

func (c *tcpLikeConn) SetDeadline(t time.Time) error {
	_ = c.SetWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *tcpLikeConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *tcpLikeConn) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c.mu.Lock()
		d := c.deadline
		c.mu.Unlock()
		if !d.IsZero() && !time.Now().Before(d) {
			return n, os.ErrDeadlineExceeded
		}
		k, err := c.Conn.Write(p[:min(len(p), tcpLikeBuffer)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// getLog asks ln for the log, reading the answer at most chunk bytes at a
// time, pause before each read; it returns the status and the body as far
// as it came, and the error that cut it short.
func getLog(ln *fasthttputil.InmemoryListener, chunk int, pause time.Duration) (status int, body []byte, err error) {
	conn, err := ln.Dial()
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/sales/s/admission-log HTTP/1.1\r\nHost: edge\r\n\r\n")); err != nil {
		return 0, nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(&slowReader{r: conn, chunk: chunk, pause: pause}), nil)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err = io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

// slowReader reads at most chunk bytes at a time from r, pause before each.
type slowReader struct {
	r     io.Reader
	chunk int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), s.chunk)])
}

// TestAdmissionLogOutlivesWriteTimeout: the log is written under a
// deadline of its own, so a server's WriteTimeout cuts neither a long line
// streamed as it is read nor a kept log that its reader takes slowly.
func TestAdmissionLogOutlivesWriteTimeout(t *testing.T) {
	const writeTimeout = 50 * time.Millisecond
	for _, tc := range []struct {
		name   string
		places int
		window int64
		delay  time.Duration // of each batch of the places scan
		keep   int           // logCache.keepBytes
		chunk  int           // the reader's bytes a read
		pause  time.Duration // before each read
	}{
		{name: "a line streamed for longer", places: 24, window: 6, delay: 10 * time.Millisecond, keep: 1, chunk: 1 << 20},
		{name: "a kept log read slowly", places: 3000, window: logWindow, chunk: 4096, pause: 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var builds atomic.Int64
			ln := logServer(t, &logCache{keepBytes: tc.keep}, writeTimeout, logBuilds(logLine(tc.places, tc.delay), tc.window, &builds))
			began := time.Now()
			status, body, err := getLog(ln, tc.chunk, tc.pause)
			took := time.Since(began)
			if err != nil || status != fasthttp.StatusOK {
				t.Fatalf("GET the log = %d, %d bytes, %v after %v; want 200, whole (the server's WriteTimeout is %v)", status, len(body), err, took, writeTimeout)
			}
			if n := logEntries(t, body); n != tc.places {
				t.Errorf("the log lists %d places, want %d", n, tc.places)
			}
			if took < 3*writeTimeout {
				t.Errorf("the answer took %v, want several times the WriteTimeout %v for the test to show anything", took, writeTimeout)
			}
		})
	}
}

// TestAdmissionLogOneBuildAtATime: readers who ask for a log while it is
// being built wait for that build and get its body; none builds it again.
func TestAdmissionLogOneBuildAtATime(t *testing.T) {
	t.Parallel()
	const readers, places = 8, 50
	var builds, calls atomic.Int64
	build := logBuilds(logLine(places, 0), logWindow, &builds)
	started, release := make(chan struct{}, readers), make(chan struct{})
	slow := func() (*logBuilder, []byte, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return build()
	}
	c := &logCache{}
	bodies, errs := make([][]byte, readers), make([]error, readers)
	var wg sync.WaitGroup
	ask := func(i int) {
		defer wg.Done()
		var ctx fasthttp.RequestCtx
		errs[i] = serveLog(&ctx, c, "s", logFinal, slow)
		bodies[i] = append([]byte(nil), ctx.Response.Body()...)
	}
	wg.Add(1)
	go ask(0)
	<-started
	for i := 1; i < readers; i++ {
		wg.Add(1)
		go ask(i)
	}
	time.Sleep(50 * time.Millisecond) // for the others to come to the build under way
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d readers asking at once built the log %d times, want once", readers, n)
	}
	for i := range readers {
		if errs[i] != nil || !bytes.Equal(bodies[i], bodies[0]) {
			t.Errorf("reader %d: %v, %d bytes; want the log the first reader got (%d bytes)", i, errs[i], len(bodies[i]), len(bodies[0]))
		}
	}
	if n := logEntries(t, bodies[0]); n != places {
		t.Errorf("the log lists %d places, want %d", n, places)
	}
}

// TestAdmissionLogBusy: a reader who waits longer than the cache's wait
// for another's build is answered 503 please_wait with Retry-After.
func TestAdmissionLogBusy(t *testing.T) {
	t.Parallel()
	var builds, calls atomic.Int64
	build := logBuilds(logLine(10, 0), logWindow, &builds)
	started, release := make(chan struct{}), make(chan struct{})
	slow := func() (*logBuilder, []byte, error) { // the first build waits for release
		if calls.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
		return build()
	}
	c := &logCache{wait: 30 * time.Millisecond}
	first := make(chan error)
	go func() {
		var ctx fasthttp.RequestCtx
		first <- serveLog(&ctx, c, "s", logFinal, slow)
	}()
	<-started
	var ctx fasthttp.RequestCtx
	err := serveLog(&ctx, c, "s", logFinal, slow)
	close(release)
	if e, _ := errorTable.Classify(err); err == nil || e.Status != fasthttp.StatusServiceUnavailable || e.Code != "please_wait" || e.RetryAfter < 1 {
		t.Errorf("a second reader during a build = %v (%d %s, Retry-After %d), want 503 please_wait with Retry-After", err, e.Status, e.Code, e.RetryAfter)
	}
	if err := <-first; err != nil {
		t.Errorf("the reader building = %v, want the log", err)
	}
	if err := serveLog(&ctx, c, "s", logFinal, slow); err != nil || builds.Load() != 1 {
		t.Errorf("a reader after the build = %v after %d builds, want the kept log after 1", err, builds.Load())
	}
}

// TestAdmissionLogKept: which logs a node keeps, and for how long: a
// settling log for its max-age, a final one for good, none longer than
// keepBytes, and the least recently served first let go of for room.
func TestAdmissionLogKept(t *testing.T) {
	t.Parallel()
	type ask struct {
		sale  string
		at    time.Duration // after logEnd
		build bool          // want a build
		final bool          // want the final Cache-Control
	}
	const places = 50
	var probe atomic.Int64
	var ctx fasthttp.RequestCtx
	if err := serveLog(&ctx, &logCache{}, "s", logFinal, logBuilds(logLine(places, 0), logWindow, &probe)); err != nil {
		t.Fatal(err)
	}
	size := len(ctx.Response.Body())
	for _, tc := range []struct {
		name        string
		keep, total int // logCache's; 0: the defaults
		asks        []ask
	}{
		{name: "settling, for its max-age", asks: []ask{
			{"s", 10 * time.Second, true, false}, {"s", 14 * time.Second, false, false}, {"s", 15 * time.Second, true, false}}},
		{name: "final, for good", asks: []ask{
			{"s", 2 * time.Minute, true, true}, {"s", 24 * time.Hour, false, true}, {"s", 30 * 24 * time.Hour, false, true}}},
		{name: "settling, then final", asks: []ask{
			{"s", 58 * time.Second, true, false}, {"s", 61 * time.Second, false, false}, {"s", 63 * time.Second, true, true},
			{"s", 10 * time.Minute, false, true}}},
		{name: "too long to keep", keep: size - 1, asks: []ask{
			{"s", 2 * time.Minute, true, true}, {"s", 2 * time.Minute, true, true}}},
		{name: "the least recently served let go of", total: 2*size + size/2, asks: []ask{
			{"a", time.Hour, true, true}, {"b", time.Hour, true, true}, {"a", time.Hour, false, true},
			{"c", time.Hour, true, true}, {"a", time.Hour, false, true}, {"b", time.Hour, true, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &logCache{keepBytes: tc.keep, totalBytes: tc.total}
			var builds atomic.Int64
			build := logBuilds(logLine(places, 0), logWindow, &builds)
			for i, a := range tc.asks {
				before := builds.Load()
				var ctx fasthttp.RequestCtx
				if err := serveLog(&ctx, c, a.sale, logEnd.Add(a.at), build); err != nil {
					t.Fatalf("ask %d (%s at end+%v) = %v", i, a.sale, a.at, err)
				}
				cache := string(ctx.Response.Header.Peek("Cache-Control"))
				wantCache := string(logSettlingCache)
				if a.final {
					wantCache = string(logFinalCache)
				}
				if built := builds.Load() > before; built != a.build || cache != wantCache {
					t.Errorf("ask %d (%s at end+%v): built %v, Cache-Control %q; want built %v, %q", i, a.sale, a.at, built, cache, a.build, wantCache)
				}
				if n := logEntries(t, ctx.Response.Body()); n != places {
					t.Errorf("ask %d: the log lists %d places, want %d", i, n, places)
				}
			}
		})
	}
}

// TestAdmissionLogStreamedToOneReaderAtATime: a log too long to keep is
// built as it streams, for one reader at a time: another reader meanwhile
// hears please_wait, and the next one after it gets a build of its own.
func TestAdmissionLogStreamedToOneReaderAtATime(t *testing.T) {
	t.Parallel()
	const places = 24
	var builds atomic.Int64
	c := &logCache{keepBytes: 1, wait: 10 * time.Millisecond}
	ln := logServer(t, c, time.Minute, logBuilds(logLine(places, 10*time.Millisecond), 6, &builds))
	type answer struct {
		status int
		body   []byte
		err    error
	}
	first := make(chan answer)
	go func() {
		status, body, err := getLog(ln, 1<<20, 0)
		first <- answer{status, body, err}
	}()
	testenv.Eventually(t, 5*time.Second, "the first reader's build begun", func() bool { return builds.Load() > 0 })
	time.Sleep(20 * time.Millisecond)
	status, body, err := getLog(ln, 1<<20, 0)
	if err != nil || status != fasthttp.StatusServiceUnavailable || !bytes.Contains(body, []byte(`"please_wait"`)) {
		t.Errorf("a second reader while the log streams = %d (%d bytes), %v; want 503 please_wait", status, len(body), err)
	}
	a := <-first
	if a.err != nil || a.status != fasthttp.StatusOK || logEntries(t, a.body) != places {
		t.Fatalf("the reader streaming = %d, %d bytes, %v; want 200 with %d places", a.status, len(a.body), a.err, places)
	}
	status, body, err = getLog(ln, 1<<20, 0)
	if err != nil || status != fasthttp.StatusOK || logEntries(t, body) != places || builds.Load() != 2 {
		t.Errorf("a reader after the stream = %d, %d bytes, %v, after %d builds; want 200 with %d places, built again", status, len(body), err, builds.Load(), places)
	}
}

// TestAdmissionLogFailedBuild: a build that fails is answered with its
// error and kept from no later reader, who builds again.
func TestAdmissionLogFailedBuild(t *testing.T) {
	t.Parallel()
	f := logLine(10, 0)
	f.failFrom = 1
	var builds atomic.Int64
	c := &logCache{}
	var ctx fasthttp.RequestCtx
	if err := serveLog(&ctx, c, "s", logFinal, logBuilds(f, logWindow, &builds)); err == nil {
		t.Fatalf("a build whose scan fails = nil error, want the scan's")
	}
	f.failFrom = 0
	ctx = fasthttp.RequestCtx{}
	if err := serveLog(&ctx, c, "s", logFinal, logBuilds(f, logWindow, &builds)); err != nil || logEntries(t, ctx.Response.Body()) != 10 {
		t.Errorf("the reader after a failed build = %v, want the log", err)
	}
}

// TestLogRowMinBytes: logRowMinBytes is the shortest entry appendRow
// writes, with its separator.
func TestLogRowMinBytes(t *testing.T) {
	b := &logBuilder{}
	if got := len(b.appendRow([]byte(",\n"), logRow{place: 1})); got != logRowMinBytes {
		t.Errorf("the shortest entry takes %d bytes, logRowMinBytes says %d", got, logRowMinBytes)
	}
}
