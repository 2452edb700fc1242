package line

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/batch"
	"github.com/flashgate/flashgate/internal/redisscript"
)

var (
	//go:embed join.lua
	joinSource string
	//go:embed settings.lua
	settingsSource string
	//go:embed restore.lua
	restoreSource string
	//go:embed raise.lua
	raiseSource string
	//go:embed seal.lua
	sealSource string

	joinScript     = redis.NewScript(joinSource)
	settingsScript = redis.NewScript(settingsSource)
	restoreScript  = redis.NewScript(restoreSource)
	raiseScript    = redis.NewScript(raiseSource)
	sealScript     = redis.NewScript(sealSource)
)

// Errors callers branch on.
var (
	// ErrLost: Redis does not hold the sale's line (it lost its data, or
	// the line was never restored from the origin); nothing is handed out
	// until it is.
	ErrLost = errors.New("queue: the sale's line is not in Redis")
	// ErrWait: the join would pass the line's durable ceiling; it gets a
	// place once the ceiling is raised.
	ErrWait = errors.New("queue: the line is at its durable ceiling")
)

// lineErr turns a script's lineLost failure into ErrLost: the one place
// that reads the reply (codes.go).
func lineErr(err error) error {
	if err != nil && redis.HasErrorPrefix(err, lineLost) {
		return ErrLost
	}
	return err
}

// Place is a shopper's place in line.
type Place struct {
	// Pre: joined before the start; Index is the pre-queue join number and
	// the position is drawn at the start (see Shuffle).
	Pre   bool
	Index int64
	// Position in line, 1-based, for joins after the start.
	Position int64
}

// ParsePlace reads a value of the places hash (Keys.Places): "p<i>", the
// i-th pre-queue join, or a position.
func ParsePlace(s string) (Place, error) {
	if rest, ok := strings.CutPrefix(s, placePre); ok {
		i, err := strconv.ParseInt(rest, 10, 64)
		return Place{Pre: true, Index: i}, err
	}
	p, err := strconv.ParseInt(s, 10, 64)
	return Place{Position: p}, err
}

// JoinerOptions tune join batching; zero values take the defaults.
type JoinerOptions struct {
	// Pipelines in flight at once; 0 means 2. Joins that arrive while
	// every pipeline is busy wait and ride together in the next round
	// trip, so fewer pipelines make larger batches and need less linger
	// (the measurements behind 2 and 200 µs are in docs/BENCHMARKS.md).
	// The second pipeline keeps joins moving while one round trip is slow.
	Pipelines int
	// MaxBatch caps joins per round trip; 0 means 512, and more than
	// maxJoinBatch means maxJoinBatch (join.lua unpacks a batch onto Lua's
	// stack, which holds about 8,000 values).
	MaxBatch int
	// Timeout bounds one round trip; 0 means 2 s.
	Timeout time.Duration
	// Linger is how long a round trip waits for more joins to ride along
	// once it has one; 0 means 200 µs, negative means not at all. In a
	// stampede it turns many small script calls into few large ones; every
	// join waits for it, so it is kept well under a round trip's cost.
	Linger time.Duration
	// Observe, when not nil, hears where each sale's counters stand after
	// every round trip that carried its joins, so the line's ceilings can
	// be raised before joins reach them. It runs on a join worker before
	// the round trip's joins are answered: it must not block.
	Observe func(sale string, lv Level)
}

// Level is where a sale's counters stood against their durable ceilings in
// one join round trip.
type Level struct {
	Lost        bool // Redis did not hold the line; nothing else is set
	BeforeStart bool // joins took pre-queue indexes
	Pre         int64
	PreCeiling  int64
	Post        int64
	PostCeiling int64
	Refused     int    // joins that got no place: the counter was at its ceiling
	Epoch       string // of the restore that put the line in Redis
}

// maxJoinBatch is the largest MaxBatch.
const maxJoinBatch = 2048

// Joiner hands out places in line. Joins that arrive while a round trip is
// in flight ride together in the next one: one script call per sale carries
// all of that sale's joins.
type Joiner struct {
	rdb   redis.UniversalClient
	keys  Keys
	opts  JoinerOptions
	joins *batch.Batcher[*joinCall]
}

type joinCall struct {
	ctx     context.Context
	sale    string
	starts  time.Time
	account string
	place   Place
	length  int64
	err     error
	done    chan struct{}
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("line: closed")

// NewJoiner starts the join workers; Close stops them.
func NewJoiner(rdb redis.UniversalClient, keys Keys, opts JoinerOptions) *Joiner {
	if opts.Pipelines <= 0 {
		opts.Pipelines = 2
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	opts.MaxBatch = min(opts.MaxBatch, maxJoinBatch)
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Linger == 0 {
		opts.Linger = 200 * time.Microsecond
	}
	j := &Joiner{rdb: rdb, keys: keys, opts: opts}
	j.joins = batch.New(batch.Options{Workers: opts.Pipelines, MaxBatch: opts.MaxBatch, Linger: max(opts.Linger, 0)}, j.run)
	return j
}

// Join returns the account's place in the sale's line, and the line's length.
// Joining again returns the same place. Errors wrap ErrWait when the line is
// at its durable ceiling, and ErrLost when Redis does not hold the line.
func (j *Joiner) Join(ctx context.Context, sale string, startsAt time.Time, account string) (Place, int64, error) {
	c := &joinCall{ctx: ctx, sale: sale, starts: startsAt, account: account, done: make(chan struct{})}
	if err := j.joins.Submit(ctx, c); err != nil {
		if errors.Is(err, batch.ErrClosed) {
			return Place{}, 0, ErrClosed
		}
		return Place{}, 0, err
	}
	select {
	case <-c.done:
		return c.place, c.length, c.err
	case <-ctx.Done():
		return Place{}, 0, ctx.Err()
	}
}

// Close stops the workers after answering the joins already queued; a join
// that arrives later gets ErrClosed.
func (j *Joiner) Close() { j.joins.Close() }

// run sends one script call per sale in the batch, all in one pipeline.
func (j *Joiner) run(calls []*joinCall) {
	bySale := map[string][]*joinCall{}
	var order []string
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		if _, ok := bySale[c.sale]; !ok {
			order = append(order, c.sale)
		}
		bySale[c.sale] = append(bySale[c.sale], c)
	}
	if len(order) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Timeout)
	defer cancel()
	cmds := redisscript.Each(ctx, j.rdb, joinScript, len(order), func(i int) ([]string, []any) {
		sale := order[i]
		calls := bySale[sale]
		args := make([]any, 0, len(calls)+1)
		args = append(args, calls[0].starts.UnixMilli())
		for _, c := range calls {
			args = append(args, c.account)
		}
		return []string{j.keys.Pre(sale), j.keys.Post(sale), j.keys.Places(sale), j.keys.Line(sale)}, args
	})
	for i, sale := range order {
		calls := bySale[sale]
		lv, ok := readJoins(calls, cmds[i])
		// The observer hears first, so a caller that sees its join's
		// answer knows the level was reported.
		if ok && j.opts.Observe != nil {
			j.opts.Observe(sale, lv)
		}
		for _, c := range calls {
			close(c.done)
		}
	}
}

// readJoins fills in a sale's joins' answers from its script call (the
// caller hands them over) and returns the counters' level; false when the
// call failed for another reason than a lost line.
func readJoins(calls []*joinCall, cmd *redis.Cmd) (Level, bool) {
	vals, err := cmd.StringSlice()
	err = lineErr(err)
	if err == nil && len(vals) != len(calls)+joinTail {
		err = fmt.Errorf("join script returned %d values for %d joins", len(vals), len(calls))
	}
	var tail [joinTail - 1]int64 // the numbers before the epoch
	for k := 0; err == nil && k < len(tail); k++ {
		tail[k], err = strconv.ParseInt(vals[len(calls)+k], 10, 64)
	}
	lv := Level{Lost: errors.Is(err, ErrLost)}
	if err == nil {
		lv = Level{Pre: tail[1], PreCeiling: tail[2], Post: tail[3], PostCeiling: tail[4], BeforeStart: tail[5] == replyTrue,
			Epoch: vals[len(calls)+len(tail)]}
	}
	for i, c := range calls {
		switch {
		case err != nil:
			c.err = fmt.Errorf("join sale %s: %w", c.sale, err)
		case vals[i] == joinWait:
			c.err = fmt.Errorf("join sale %s: %w", c.sale, ErrWait)
			lv.Refused++
		default:
			c.place, c.err = ParsePlace(vals[i])
			c.length = tail[0]
		}
	}
	return lv, err == nil || lv.Lost
}

// Claim gives an account back the place its queue token carries, when Redis
// no longer knows it (Redis lost the line's data and it was restored at its
// ceilings): the account's entry is set to that place unless it has one, and
// the entry is returned. The token is the proof; the caller verifies it. A
// place handed out before a loss is below the restored counters, so it can
// never be handed to anyone else afterwards.
func (j *Joiner) Claim(ctx context.Context, sale, account string, p Place) (Place, error) {
	value := strconv.FormatInt(p.Position, 10)
	if p.Pre {
		value = placePre + strconv.FormatInt(p.Index, 10)
	}
	key := j.keys.Places(sale)
	pipe := j.rdb.Pipeline()
	pipe.HSetNX(ctx, key, account, value)
	get := pipe.HGet(ctx, key, account)
	if _, err := pipe.Exec(ctx); err != nil {
		return Place{}, fmt.Errorf("claim place in sale %s: %w", sale, err)
	}
	have, err := ParsePlace(get.Val())
	if err != nil {
		return Place{}, fmt.Errorf("claim place in sale %s: stored place %q: %w", sale, get.Val(), err)
	}
	return have, nil
}
