package admission

import (
	"math"
	"time"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/edge/internal/snapshot"
)

// View is everything the node knows about a sale at one tick: the origin's
// snapshot, this node's reading of the admission cursor and the pre-queue
// draw, and the snapshot body ready to serve. Nothing in it changes after
// the tick that built it.
type View struct {
	Sale snapshot.Sale
	// State is this node's reading of the sale's line; valid when HasState.
	State    line.State
	HasState bool
	// Body is the snapshot JSON served at GET /v1/sales/{id}, ETag its tag.
	Body []byte
	ETag string
	// LongCache: finally sold out or ended; nothing in Body will change.
	LongCache bool

	fetchedAt time.Time // when the fetch that brought Sale started
	seed      []byte
	shuffle   line.Shuffle // over the pre-queue, once its size is sealed after the start
	drawn     bool         // shuffle is set
	available int64        // the units Sale shows available
	opts      *Options     // the controller's
}

// Current reports whether the view's origin snapshot is recent enough to
// answer from at now; a stale one means the origin (or its Redis) is
// unreachable or slow for this sale, and "open, 150 left" may no longer be
// true.
func (v *View) Current(now time.Time) bool {
	return now.Sub(v.fetchedAt) <= v.opts.SnapshotStaleAfter
}

// Fresh reports whether the view's cursor reading is recent enough to
// answer from at now and its line is in Redis; a stale one means Redis is
// unreachable, a lost one that Redis lost the line and it is being restored.
func (v *View) Fresh(now time.Time) bool {
	return v.HasState && !v.State.Lost && now.Sub(v.State.ReadAt) <= v.opts.StaleAfter
}

// Ready is nil when a shopper's place can be answered from the view at now:
// ErrNotReady while its snapshot is not Current, ErrCursorStale while its
// cursor reading is not Fresh.
func (v *View) Ready(now time.Time) error {
	if !v.Current(now) {
		return ErrNotReady
	}
	if !v.Fresh(now) {
		return ErrCursorStale
	}
	return nil
}

// Draw is the pre-queue draw the view shows: the sale's seed and, once the
// sale has started and the draw's size is sealed, that size (drawn false
// before).
func (v *View) Draw() (seed []byte, size int64, drawn bool) {
	return v.seed, v.State.DrawSize, v.drawn
}

// Joinable is nil when a shopper may join the sale's line at now:
// ErrSaleClosed once it has ended, ErrSoldOut once it is sold out for good
// (true however old the snapshot), else what Ready says.
func (v *View) Joinable(now time.Time) error {
	if !now.Before(v.Sale.EndsAt) {
		return ErrSaleClosed
	}
	if v.Sale.SoldOut && v.Sale.Final {
		return ErrSoldOut
	}
	return v.Ready(now)
}

// Reservable is nil when an admitted shopper's reserve may go on to the
// origin at now: ErrSoldOut while the snapshot is current and shows the
// sale sold out, or shows it sold out for good however old it is (the edge
// answers that from memory, the origin never sees it), and ErrNotReady
// while the snapshot is not current.
func (v *View) Reservable(now time.Time) error {
	current := v.Current(now)
	if v.Sale.SoldOut && (current || v.Sale.Final) {
		return ErrSoldOut
	}
	if !current {
		return ErrNotReady
	}
	return nil
}

// Estimate is what a shopper at a place in line hears.
type Estimate struct {
	// Position is the place in line: for the pre-queue the drawn one, 0
	// until the draw.
	Position    int64
	NowServing  int64
	WaitS       int64 // estimated wait in seconds
	PollAfterMS int64 // when to ask again
	PreQueue    bool
	Paused      bool // admission is paused by ops; WaitS assumes the set rate
	// Admitted: the cursor has reached Position; the shopper may reserve.
	Admitted bool
}

// Estimate answers for a shopper at place pos (the join index for the
// pre-queue): the position (drawn for the pre-queue once the sale starts),
// the wait at the measured admission rate, and a poll interval that grows
// with the distance from the front.
func (v *View) Estimate(pre bool, pos int64, now time.Time) Estimate {
	e := Estimate{PreQueue: pre, NowServing: v.State.NowServing}
	maxPoll := v.opts.MaxPollAfter
	if pre {
		if !v.drawn {
			// Places are drawn at the start: until then, only the time to
			// it. Come back after the draw, each at its own moment of a
			// window as long as the pre-queue takes to admit (up to 10 s),
			// so the whole pre-queue does not poll in the same second.
			untilStart := max(v.Sale.StartsAt.Sub(now), 0)
			e.WaitS = int64(math.Ceil(untilStart.Seconds()))
			e.PollAfterMS = clampMS(untilStart+spread(pos, v.preQueueWindow()), time.Second, maxPoll)
			return e
		}
		drawn, err := v.shuffle.Position(pos)
		if err != nil {
			drawn = pos // the token names an index the draw does not have: keep it honest
		}
		pos = drawn
	}
	e.Position = pos
	ahead := pos - v.State.NowServing
	if ahead <= 0 {
		e.Admitted = pos > 0
		e.PollAfterMS = min(jitter(1000, pos), maxPoll.Milliseconds())
		return e
	}
	// The wait at the rate the cursor has moved lately: while admission
	// holds for the checkout that is far below the set rate, and the
	// estimate (and so the poll interval) grows, rather than promise a
	// wait at a rate nobody is admitted at and bring the whole line back
	// each second. A standing cursor counts at a tenth of the set rate,
	// which keeps the wait finite and the front of the line asking.
	rate := v.State.RatePerSecond
	if v.State.Measured {
		rate = max(v.State.MeasuredRate, v.State.RatePerSecond/10)
	} else if v.State.MeasuredRate > 0 {
		rate = v.State.MeasuredRate
	}
	if v.State.Paused {
		// Paused: the estimate is what the wait will be once admission
		// resumes at the configured rate, and the answer says it is paused.
		rate = v.State.RatePerSecond
		e.Paused = true
	}
	wait := 30 * time.Second
	if rate > 0 {
		wait = time.Duration(float64(ahead) / rate * float64(time.Second))
	}
	if now.Before(v.Sale.StartsAt) {
		wait += v.Sale.StartsAt.Sub(now)
	}
	e.WaitS = int64(math.Ceil(wait.Seconds()))
	// Half the wait, at least minWaitingPoll: the page also watches the
	// snapshot's now_serving (through the CDN, every second) and asks at
	// once when its turn shows there, so the poll only refreshes the
	// estimate and is the backstop of a client that does not watch.
	if wait/2 >= maxPoll {
		// Far back, everyone would be told the cap: a burst of joins would
		// come back as one burst of polls a cap later, and again after
		// that. Each is told a fixed moment of the cap's last quarter (a
		// wider spread costs more polls: the last half, a third more).
		e.PollAfterMS = (maxPoll - maxPoll/4 + spread(pos, maxPoll/4)).Milliseconds()
		return e
	}
	e.PollAfterMS = min(jitter(clampMS(wait/2, minWaitingPoll, maxPoll), pos), maxPoll.Milliseconds())
	return e
}

// minWaitingPoll is the shortest poll interval told to a shopper still
// waiting: near the front every shopper would otherwise ask each second,
// and the front of a long line held for the checkout is thousands.
const minWaitingPoll = 2 * time.Second

// preQueueWindow is how long the part of the pre-queue that the stock can
// serve takes to admit at the soonest — the start's ramp up to the set rate
// — between 1 and 10 seconds: the window its first polls after the draw are
// spread over. Shorter would bring the whole pre-queue back at once; longer
// would let shoppers drawn early learn it only after later ones (who polled
// sooner) had taken the units.
func (v *View) preQueueWindow() time.Duration {
	served := min(v.State.PreQueue, v.available)
	seconds := 10.0
	if v.State.RatePerSecond > 0 {
		seconds = rampSeconds(float64(served) / v.State.RatePerSecond)
	}
	return time.Duration(min(max(seconds, 1), 10) * float64(time.Second))
}

// spread places a shopper's index evenly and fixedly in [0, window): the
// same shopper always gets the same moment (a fixed stride through 1,000
// steps, so neighbours in line land far apart).
func spread(index int64, window time.Duration) time.Duration {
	const steps = 1000
	return window * time.Duration(uint64(index)*2654435761%steps) / steps
}

// jitter lengthens a poll interval by up to a quarter, by the shopper's
// place (a fixed stride through 250 steps): shoppers told the same interval
// at the same moment would otherwise all come back in the same instant,
// wave after wave.
func jitter(ms, pos int64) int64 {
	return ms + ms*int64(uint64(pos)*2654435761%250)/1000
}

func clampMS(d, lo, hi time.Duration) int64 {
	return min(max(d, lo), hi).Milliseconds()
}
