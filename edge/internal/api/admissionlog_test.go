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
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/queue"
)

// fakePlaces is a places hash read in batches of three, each account as
// often as listed (a scan may give one twice); failFrom makes every scan
// from that read on fail (0: none).
type fakePlaces struct {
	accounts []string
	places   []queue.Place
	reads    int // scans begun from cursor 0
	failFrom int
}

func (f *fakePlaces) scan(_ context.Context, _ string, cursor uint64, fn func(string, queue.Place)) (uint64, error) {
	if cursor == 0 {
		f.reads++
	}
	if f.failFrom > 0 && f.reads >= f.failFrom {
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
	AdmittedAt    *string `json:"admitted_at"`
}

// TestLogBuilderSortsByPlaceWindowByWindow: the log lists every place
// once, by place, however many windows the line takes and however the
// scan orders and repeats accounts; a pre-queue join out of the draw is
// listed first at place 0 rather than dropped; a second account at a
// taken place is listed beside the first.
func TestLogBuilderSortsByPlaceWindowByWindow(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	const pre, later = 7, 6
	draw := queue.NewShuffle(seed, pre)
	f := &fakePlaces{}
	add := func(a string, p queue.Place) { f.accounts, f.places = append(f.accounts, a), append(f.places, p) }
	for i := pre + later; i >= 1; i-- { // the scan's order is not the line's
		if i <= pre {
			add(fmt.Sprintf("early-%d", i), queue.Place{Pre: true, Index: int64(i)})
		} else {
			add(fmt.Sprintf("late-%d", i), queue.Place{Position: int64(i)})
		}
	}
	add("early-3", queue.Place{Pre: true, Index: 3})     // given twice by the scan
	add("stray", queue.Place{Pre: true, Index: pre + 1}) // outside the draw
	add("twin", queue.Place{Position: pre + 2})          // a place already taken
	for _, window := range []int64{4, 5, 100} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			f.reads = 0
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
				if e.AccountSHA256 != hash(w.account) || pre != w.pre || e.Place != w.place || e.AdmittedAt != nil {
					t.Errorf("entry %d = %+v (pre %d), want %s's: hash %s, pre_index %d, place %d, not admitted", i, e, pre, w.account, hash(w.account), w.pre, w.place)
				}
			}
			if passes := (pre + later + window - 1) / window; int64(f.reads) != passes {
				t.Errorf("the places hash was scanned %d times, want once per window of %d: %d", f.reads, window, passes)
			}
		})
	}
}

// TestLogBuilderFailsMidStream: a read that fails after the first window
// is an error of write, for the handler to drop the connection on.
func TestLogBuilderFailsMidStream(t *testing.T) {
	f := &fakePlaces{failFrom: 2}
	for i := 1; i <= 10; i++ {
		f.accounts, f.places = append(f.accounts, fmt.Sprintf("a%d", i)), append(f.places, queue.Place{Position: int64(i)})
	}
	b := &logBuilder{sale: "s", scan: f.scan, budget: func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.Background())
	}, window: 4, draw: queue.NewShuffle([]byte("seed"), 0)}
	if err := b.read(1, 10); err != nil {
		t.Fatalf("read = %v", err)
	}
	var out bytes.Buffer
	if err := b.write(bufio.NewWriter(&out), []byte(`{}`)); err == nil {
		t.Errorf("write with a failing second read = nil error, want the read's")
	}
}
