package api

import (
	"bufio"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/queue"
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

// logTimeFormat is admitted_at's: RFC 3339 in UTC, to the millisecond.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// codeSaleNotOver: the admission log asked for before the sale's end.
const codeSaleNotOver = "sale_not_over"

var errSaleNotOver = httpapi.New(fasthttp.StatusConflict, codeSaleNotOver,
	"The sale has not ended; its admission log is published at its end.")

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

type logAdmission struct {
	AdmittedThrough int64 `json:"admitted_through"` // the last place the cursor reached before the end
	Steps           int   `json:"steps"`            // the cursor's moves recorded before the end
	StepsCapped     bool  `json:"steps_capped"`     // admission.MaxSteps moves were recorded: later ones were not
}

// admissionLog: GET /v1/sales/{sale}/admission-log, once the sale has
// ended (409 sale_not_over before): every place handed out in its line,
// by place, with the draw's seed and the cursor's recorded moves, for
// anyone to check that the pre-queue was drawn as committed and admitted
// in place order (docs/FAIRNESS.md, flashgate-verify). Accounts appear as
// SHA-256(salt ‖ account) under a per-sale salt made from the token keys
// and revealed here. The body is streamed; a Redis failure before it
// starts answers please_wait, and one while a line longer than logWindow
// streams drops the connection, so that nobody takes a cut log for whole.
func (s *Server) admissionLog(ctx *fasthttp.RequestCtx, params []string) error {
	v, err := s.Admission.View(params[0])
	if err != nil {
		return err
	}
	now := s.Clock()
	if now.Before(v.Sale.EndsAt) {
		return errSaleNotOver
	}
	if !v.Fresh(now) {
		return admission.ErrCursorStale
	}
	seed, n, drawn := v.Draw()
	if !drawn {
		return admission.ErrNotReady // the draw is sealed a tick after the start
	}
	sale := v.Sale.SaleID
	c, cancel := context.WithTimeout(context.Background(), logStepsBudget)
	adm, err := s.Admission.Admissions(c, sale, v.Sale.EndsAt)
	cancel()
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, s.Issuer.DerivedKey(logKeyLabel))
	mac.Write([]byte(sale))
	b := &logBuilder{sale: sale, scan: s.Admission.ScanPlaces, budget: s.budget, window: logWindow,
		salt: mac.Sum(nil), draw: queue.NewShuffle(seed, n), adm: adm}
	if err := b.read(1, v.State.QueueLength); err != nil {
		return err
	}
	head, err := json.Marshal(logHead{
		SaleID: sale, StartsAt: v.Sale.StartsAt, EndsAt: v.Sale.EndsAt,
		Draw:      logDraw{Algorithm: queue.ShuffleAlgorithm, Seed: hex.EncodeToString(seed), SeedSHA256: queue.SeedHash(seed), PreQueue: n},
		Salt:      hex.EncodeToString(b.salt),
		Admission: logAdmission{AdmittedThrough: adm.Through(), Steps: adm.Steps, StepsCapped: adm.Capped},
	})
	if err != nil {
		return fmt.Errorf("encode the admission log of sale %s: %w", sale, err)
	}
	h := &ctx.Response.Header
	if now.Before(v.Sale.EndsAt.Add(logSettle)) {
		h.SetCanonical(httpapi.HeaderCacheControl, logSettlingCache)
	} else {
		h.SetCanonical(httpapi.HeaderCacheControl, logFinalCache)
	}
	h.Set("X-Content-Type-Options", "nosniff")
	ctx.SetContentType("application/json")
	conn, log := ctx.Conn(), s.Log
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if err := b.write(w, head); err != nil {
			log.Warn("admission log cut short", "sale", sale, "err", err)
			_ = conn.Close() // the client sees a broken answer, not a short log
		}
	})
	return nil
}

// logBuilder reads a sale's places for its admission log, window places at
// a time, and writes the log. It is used by one goroutine at a time.
type logBuilder struct {
	sale   string
	scan   func(ctx context.Context, sale string, cursor uint64, fn func(account string, p queue.Place)) (uint64, error)
	budget func() (context.Context, context.CancelFunc) // of one HSCAN
	window int64
	salt   []byte
	draw   queue.Shuffle
	adm    admission.Admissions

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
func (b *logBuilder) take(account string, p queue.Place) {
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
	if at, ok := b.adm.At(r.place); ok {
		dst = append(dst, `,"admitted_at":"`...)
		dst = at.UTC().AppendFormat(dst, logTimeFormat)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}
