package line

import (
	"testing"
	"time"
)

// Before the start the line after it is readied for the open: its block is
// the pre-queue's size when that is more than the recent join rate's (up to
// five seconds of admissions), so the opening burst finds places without a
// raise's round trip. After the start, and for the pre-queue itself, the
// block follows the join rate.
func TestJoinRaiseReadiesTheOpen(t *testing.T) {
	k := &Keeper{opts: Options{BlockWindow: time.Second, MinBlock: 256, MaxBlock: 50_000}}
	quiet := &saleLine{rate: 10_000} // no recent joins: the block is MinBlock
	busy := &saleLine{rate: 10_000, samples: []sample{{at: time.Unix(0, 0), length: 0}, {at: time.Unix(1, 0), length: 4_000}}}
	slowAdmission := &saleLine{rate: 1_000} // five seconds of admissions: 5,000 places
	for _, c := range []struct {
		name                               string
		s                                  *saleLine
		before                             bool
		pre, preCeiling, post, postCeiling int64
		want                               Ceilings
	}{
		{"before, a pre-queue of 20,000: the post line gets it", quiet, true, 20_000, 20_256, 0, 256, Ceilings{Post: 20_000}},
		{"before, the post line within half of it: raised", quiet, true, 20_000, 20_256, 0, 10_000, Ceilings{Post: 20_000}},
		{"before, the post line past half of it: left", quiet, true, 20_000, 20_256, 0, 10_001, Ceilings{}},
		{"before, the pre-queue near its ceiling: a rate block", quiet, true, 20_000, 20_100, 0, 20_000, Ceilings{Pre: 20_256}},
		{"before, a pre-queue past MaxBlock: capped", quiet, true, 80_000, 80_256, 0, 256, Ceilings{Post: 50_000}},
		{"before, the join rate's block above the pre-queue: the rate's", busy, true, 1_000, 6_000, 0, 1_000, Ceilings{Post: 4_000}},
		{"before, a pre-queue past five seconds of admissions: capped there", slowAdmission, true, 20_000, 20_256, 0, 256, Ceilings{Post: 5_000}},
		{"after the start: the rate's block only", quiet, false, 20_000, 20_256, 200, 256, Ceilings{Post: 456}},
		{"after the start, busy: the rate's block", busy, false, 20_000, 20_256, 10_000, 11_000, Ceilings{Post: 14_000}},
	} {
		got := k.joinRaise(c.s, c.before, c.pre, c.preCeiling, c.post, c.postCeiling, false)
		if got != c.want {
			t.Errorf("%s: joinRaise(pre %d/%d, post %d/%d) = %+v, want %+v", c.name, c.pre, c.preCeiling, c.post, c.postCeiling, got, c.want)
		}
	}
}

// A slow raise stretches the join blocks to four times its round trip, so
// the next raise, set off at half a block, has twice that to land; a raise
// that took very long stretches them to eight BlockWindows at most.
func TestJoinBlockFollowsTheRaise(t *testing.T) {
	k := &Keeper{opts: Options{BlockWindow: time.Second, MinBlock: 256, MaxBlock: 1 << 20}}
	for _, c := range []struct {
		took time.Duration
		want int64
	}{
		{0, 4_000},                      // a second of joins at 4,000/s
		{100 * time.Millisecond, 4_000}, // quick raises: BlockWindow
		{500 * time.Millisecond, 8_000}, // 4 × 0.5 s of joins
		{3 * time.Second, 32_000},       // capped at 8 BlockWindows
	} {
		s := &saleLine{raiseTook: c.took, samples: []sample{{at: time.Unix(0, 0), length: 0}, {at: time.Unix(1, 0), length: 4_000}}}
		if got := k.joinBlock(s); got != c.want {
			t.Errorf("joinBlock after a raise of %v at 4,000 joins/s = %d, want %d", c.took, got, c.want)
		}
	}
}
