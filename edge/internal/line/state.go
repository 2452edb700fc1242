package line

import (
	"strconv"
	"time"
)

// State is a sale's line as one read of it found it (package admission's
// Cursor reads it each tick, with the cursor's advance).
type State struct {
	// Lost: the last tick found that Redis does not hold the sale's line
	// (it lost its data); the other fields are from the reading before, and
	// nothing is answered from them until the line is restored.
	Lost          bool
	NowServing    int64   // positions up to this one are admitted
	QueueLength   int64   // places handed out so far: PreQueue + Post
	PreQueue      int64   // the pre counter: later joins are numbered after it
	Post          int64   // joins after the start
	RatePerSecond float64 // the configured admission rate
	Paused        bool
	ChallengeBits int // the proof of work a join needs (leading zero bits; 0: none)
	// DrawSize is the pre-queue the draw permutes (positions 1..DrawSize),
	// sealed after the start; valid when Drawn.
	DrawSize int64
	Drawn    bool
	// The line's durable ceilings as Redis holds them: the counters and
	// the cursor never pass them.
	PreCeiling, PostCeiling, ServingCeiling int64
	// SettingsVersion is the version of the origin's settings that Redis
	// holds (0 before any change).
	SettingsVersion int64
	// Epoch names the restore that put the line in Redis: readings of two
	// epochs are of two lines (a restore raised the counters in between).
	// RestoredAt is when that restore ran (Redis's clock), zero for the
	// restore that created the line: queue tokens issued before it may
	// carry places Redis no longer ties to their accounts.
	Epoch      string
	RestoredAt time.Time
	// MeasuredRate is admissions per second over the last few seconds; the
	// honest basis of a wait estimate. Measured says the readings behind
	// it span at least a second: a rate of 0 then means the cursor stood
	// (held for the checkout, at a ceiling), not that nothing is known.
	MeasuredRate float64
	Measured     bool
	// AnswerRate is the rate at which the checkout answered reserves, as
	// the edges counted them (Tick.Answered), sampled about once a second:
	// the slow start admits at most twice it.
	AnswerRate float64
	// RampAt is when the last resume or raise started a ramp (Redis's
	// clock; zero: none), from RampFrom (the rate before a raise).
	RampAt   time.Time
	RampFrom float64
	ReadAt   time.Time // this node's clock when it read the state
	// RedisNow is Redis's clock at the read: the one clock that decides
	// when a sale has started (the join script uses it too).
	RedisNow time.Time
}

// Tick is what a sale's line is told each tick.
type Tick struct {
	Sale     string
	StartsAt time.Time
	// Available is the units the latest snapshot shows available: none
	// stops admission, and few slow it to twice that many a second, so a
	// handful of units coming back does not admit a second's worth of
	// shoppers to find them gone.
	Available int64
	// Hold: the node finds the checkout congested, and this tick's time
	// passes without admitting anyone (admission.Options.Hold).
	Hold bool
	// HeldAt is when the node last held, by its clock (this tick's time
	// while it holds; zero if it never has): its ticks' slow start runs
	// from then.
	HeldAt time.Time
	// Answered is how many reserves of the sale the node saw the checkout
	// answer since its last tick: the cursor's slow start admits at most
	// twice their rate.
	Answered int64
}

// Seen is what a node has read of a line: Redis never holds less of a line
// it kept, so a reading below it means Redis lost writes.
type Seen struct {
	Pre, Post, NowServing int64
}

// ScriptError turns a line script's "lost" failure (codes.go) into ErrLost
// and returns any other error as it is: for the scripts of other packages
// that check the line is whole.
func ScriptError(err error) error { return lineErr(err) }

func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }
