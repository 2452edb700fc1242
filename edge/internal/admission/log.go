package admission

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/edge/internal/line"
)

// MaxSteps is how many moves of a sale's admission cursor advance.lua
// records in the steps list (line.Keys.Steps), oldest first; later moves
// go unrecorded. Each node's tick moves the cursor at most once, so ten
// nodes at the default 100 ms tick fill it in about three hours of
// admitting; an entry takes some 25 bytes of Redis, 26 MB at most per sale.
// The list is never deleted, as no key of a sale's line is.
const MaxSteps = 1 << 20

// stepsPage is how many steps one LRANGE of the steps list reads.
const stepsPage = 10_000

// placesScan is the COUNT of one HSCAN of a places hash.
const placesScan = 1000

// Reached says when a sale's admission cursor reached its places, from the
// moves of the cursor recorded before a moment (the sale's end): place p
// was reached by the first move that took now_serving to p or past it.
// That is when the place became admissible, not when its shopper was
// admitted: a shopper who never polled, or whom the tarpit kept waiting,
// is reached all the same.
type Reached struct {
	atMS    []int64 // when each move that raised now_serving was made (unix ms, Redis's clock), oldest first
	serving []int64 // now_serving after each of them: increasing
	// Steps is the number of moves recorded before the moment.
	Steps int
	// Capped: the steps list was full before the moment, so moves before
	// it went unrecorded and places past Through may have been reached at
	// a time the log cannot tell.
	Capped bool
}

// add takes one recorded move when it was made before cutMS.
func (a *Reached) add(step string, cutMS int64) error {
	ms, serving, err := parseStep(step)
	if err != nil {
		return err
	}
	if ms >= cutMS {
		return nil
	}
	a.Steps++
	if serving > a.Through() {
		a.atMS = append(a.atMS, ms)
		a.serving = append(a.serving, serving)
	}
	return nil
}

// parseStep reads one entry of the steps list.
func parseStep(s string) (ms, serving int64, err error) {
	at, to, ok := strings.Cut(s, ":")
	if ok {
		if ms, err = strconv.ParseInt(at, 10, 64); err == nil {
			serving, err = strconv.ParseInt(to, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("admission step %q is not <unix ms>:<now_serving>", s)
	}
	return ms, serving, nil
}

// Through is the highest place reached: now_serving after the last move
// recorded (0 before any).
func (a Reached) Through() int64 {
	if len(a.serving) == 0 {
		return 0
	}
	return a.serving[len(a.serving)-1]
}

// At is when the cursor reached place; false when no recorded move did.
func (a Reached) At(place int64) (time.Time, bool) {
	i := sort.Search(len(a.serving), func(i int) bool { return a.serving[i] >= place })
	if place < 1 || i == len(a.serving) {
		return time.Time{}, false
	}
	return time.UnixMilli(a.atMS[i]), true
}

// Reached reads the moves of sale's cursor recorded before the moment
// before (the sale's end: the cursor goes on moving, but nobody is
// admitted to an ended sale), in pages of stepsPage.
func (c *Cursor) Reached(ctx context.Context, sale string, before time.Time) (Reached, error) {
	key := c.keys.Steps(sale)
	var a Reached
	var n int64
	for start := int64(0); ; start += stepsPage {
		page, err := c.rdb.LRange(ctx, key, start, start+stepsPage-1).Result()
		if err != nil {
			return Reached{}, fmt.Errorf("read the admission steps of sale %s: %w", sale, err)
		}
		for _, s := range page {
			if err := a.add(s, before.UnixMilli()); err != nil {
				return Reached{}, fmt.Errorf("read the admission steps of sale %s: %w", sale, err)
			}
		}
		n += int64(len(page))
		if len(page) < stepsPage {
			break
		}
	}
	a.Capped = n >= c.maxSteps && int64(a.Steps) == n
	return a, nil
}

// ScanPlaces reads one batch of sale's places hash, HSCAN from cursor (0
// to begin), and calls fn with each account and its place; next is 0 once
// the scan is done. A scan may give an account twice.
func (c *Cursor) ScanPlaces(ctx context.Context, sale string, cursor uint64, fn func(account string, p line.Place)) (next uint64, err error) {
	kv, next, err := c.rdb.HScan(ctx, c.keys.Places(sale), cursor, "", placesScan).Result()
	if err != nil {
		return 0, fmt.Errorf("scan the places of sale %s: %w", sale, err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p, err := line.ParsePlace(kv[i+1])
		if err != nil {
			return 0, fmt.Errorf("scan the places of sale %s: place %q: %w", sale, kv[i+1], err)
		}
		fn(kv[i], p)
	}
	return next, nil
}

// Reached is Cursor.Reached of the controller's cursor.
func (c *Controller) Reached(ctx context.Context, sale string, before time.Time) (Reached, error) {
	return c.cursor.Reached(ctx, sale, before)
}

// ScanPlaces is Cursor.ScanPlaces of the controller's cursor.
func (c *Controller) ScanPlaces(ctx context.Context, sale string, cursor uint64, fn func(account string, p line.Place)) (uint64, error) {
	return c.cursor.ScanPlaces(ctx, sale, cursor, fn)
}
