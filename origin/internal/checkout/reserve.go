package checkout

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outcome is what a reserve came to.
type Outcome int

const (
	// Created: a unit is now held for the account.
	Created Outcome = 1
	// Existing: the same token or idempotency key was seen before, or the
	// account already holds a unit; ReservationID names that reservation.
	Existing Outcome = 2
	// LimitReached: the account already bought its unit.
	LimitReached Outcome = 3
	// UnknownSKU: the SKU is not part of the sale (or not loaded).
	UnknownSKU Outcome = 4
	// SoldOut: no unit is available.
	SoldOut Outcome = 5
	// Rebuilding: the sale's Redis state is being rebuilt from Postgres;
	// nothing was taken, and the caller should try again shortly.
	Rebuilding Outcome = 6
)

func (o Outcome) String() string {
	switch o {
	case Created:
		return "created"
	case Existing:
		return "existing"
	case LimitReached:
		return "limit_reached"
	case UnknownSKU:
		return "unknown_sku"
	case SoldOut:
		return "sold_out"
	case Rebuilding:
		return "rebuilding"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// ReserveRequest asks for one unit.
type ReserveRequest struct {
	Sale           string
	SKU            string
	Account        string
	TokenID        string // the admission token's jti, burned on success
	IdempotencyKey string
	HoldTTL        time.Duration
}

// ReserveResult is a reserve's answer.
type ReserveResult struct {
	Outcome       Outcome
	ReservationID string    // set for Created, Existing and LimitReached
	ExpiresAt     time.Time // set for Created
}

// ReserverOptions tune how reserves are batched into Redis.
type ReserverOptions struct {
	// Pipelines is how many pipelines may be in flight at once; 0 means 4.
	Pipelines int
	// MaxBatch caps the reserves sent in one pipeline; 0 means 256.
	MaxBatch int
	// Timeout bounds one pipeline's round trip; 0 means 2 s.
	Timeout time.Duration
}

// Reserver runs reserve scripts for many concurrent callers, a pipeline at a
// time: a caller's request joins whatever arrived while the previous
// pipeline was in flight, so under load one round trip carries many reserves
// and an idle system adds no wait at all.
type Reserver struct {
	store   *Store
	opts    ReserverOptions
	calls   chan *reserveCall
	stop    chan struct{}
	exited  chan struct{} // closed once every worker has returned
	stopped sync.WaitGroup
	once    sync.Once
}

type reserveCall struct {
	ctx  context.Context
	req  ReserveRequest
	id   string
	res  ReserveResult
	err  error
	done chan struct{}
}

// ErrReserverClosed is returned by Reserve after Close.
var ErrReserverClosed = errors.New("checkout: reserver closed")

// NewReserver starts the pipeline workers; Close stops them.
func NewReserver(store *Store, opts ReserverOptions) *Reserver {
	if opts.Pipelines <= 0 {
		opts.Pipelines = 4
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	r := &Reserver{
		store:  store,
		opts:   opts,
		calls:  make(chan *reserveCall, opts.Pipelines*opts.MaxBatch),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	r.stopped.Add(opts.Pipelines)
	for range opts.Pipelines {
		go r.work()
	}
	go func() {
		r.stopped.Wait()
		close(r.exited)
	}()
	return r
}

// Reserve takes one unit or says why not. The script is idempotent on the
// token id and idempotency key, so a retried call returns the first outcome
// (as Existing) rather than a second unit.
func (r *Reserver) Reserve(ctx context.Context, req ReserveRequest) (ReserveResult, error) {
	id, err := newReservationID(req.Sale)
	if err != nil {
		return ReserveResult{}, err
	}
	c := &reserveCall{ctx: ctx, req: req, id: id, done: make(chan struct{})}
	select {
	case r.calls <- c:
	case <-r.stop:
		return ReserveResult{}, ErrReserverClosed
	case <-ctx.Done():
		return ReserveResult{}, ctx.Err()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-r.exited:
		// Queued just as Close drained the queue: nobody will run it.
		select {
		case <-c.done:
			return c.res, c.err
		default:
			return ReserveResult{}, ErrReserverClosed
		}
	case <-ctx.Done():
		// The script may still run; its hold is found again by the
		// idempotency key, and otherwise expires like any unpaid hold.
		return ReserveResult{}, ctx.Err()
	}
}

// Close stops taking reserves, finishes the ones already queued, and waits
// for the workers to end.
func (r *Reserver) Close() {
	r.once.Do(func() { close(r.stop) })
	<-r.exited
}

func (r *Reserver) work() {
	defer r.stopped.Done()
	batch := make([]*reserveCall, 0, r.opts.MaxBatch)
	for {
		select {
		case c := <-r.calls:
			batch = append(batch[:0], c)
		case <-r.stop:
			r.drainAfterStop()
			return
		}
	fill:
		for len(batch) < r.opts.MaxBatch {
			select {
			case c := <-r.calls:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		r.run(batch)
	}
}

// drainAfterStop answers calls that were queued before Close.
func (r *Reserver) drainAfterStop() {
	for {
		select {
		case c := <-r.calls:
			r.run([]*reserveCall{c})
		default:
			return
		}
	}
}

// run sends one batch in one pipeline and hands each caller its answer.
func (r *Reserver) run(batch []*reserveCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err // the caller gave up while queued: skip the work
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	cmds := r.pipeline(ctx, live, reserveScript.EvalSha)
	var again []*reserveCall
	for i, c := range live {
		if noScript(cmds[i].Err()) {
			again = append(again, c)
			continue
		}
		r.answer(c, cmds[i])
	}
	if len(again) > 0 {
		// An empty script cache (a restart or failover): EVAL loads it.
		for i, cmd := range r.pipeline(ctx, again, reserveScript.Eval) {
			r.answer(again[i], cmd)
		}
	}
}

func (r *Reserver) answer(c *reserveCall, cmd *redis.Cmd) {
	c.res, c.err = reserveResult(cmd)
	if c.err != nil {
		c.err = fmt.Errorf("reserve in sale %s: %w", c.req.Sale, c.err)
	}
	close(c.done)
}

func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

type evalFunc func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd

// pipeline sends one script run per call; each command carries its own
// reply or error (a connection error lands on every command).
func (r *Reserver) pipeline(ctx context.Context, batch []*reserveCall, eval evalFunc) []*redis.Cmd {
	k := r.store.keys
	pipe := r.store.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		q := c.req
		cmds[i] = eval(ctx, pipe,
			[]string{
				k.Inventory(q.Sale, q.SKU), k.Account(q.Sale, q.Account), k.Reservation(q.Sale, c.id),
				k.Holds(q.Sale), k.Intents(q.Sale), k.Rebuilding(q.Sale),
			},
			c.id, q.Account, q.SKU, q.IdempotencyKey, q.TokenID, q.HoldTTL.Milliseconds(), r.store.retention.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	return cmds
}

// reserveResult turns the script's {code, id, expires_ms} into a result.
func reserveResult(cmd *redis.Cmd) (ReserveResult, error) {
	v, err := cmd.Slice()
	if err != nil {
		return ReserveResult{}, err
	}
	if len(v) != 3 {
		return ReserveResult{}, fmt.Errorf("reserve script returned %d values, want 3", len(v))
	}
	code, _ := v[0].(int64)
	id, _ := v[1].(string)
	expires, _ := v[2].(int64)
	res := ReserveResult{Outcome: Outcome(code), ReservationID: id}
	switch res.Outcome {
	case Created:
		res.ExpiresAt = time.UnixMilli(expires).UTC()
	case Existing, LimitReached, UnknownSKU, SoldOut, Rebuilding:
	default:
		return ReserveResult{}, fmt.Errorf("reserve script returned unknown code %d", code)
	}
	return res, nil
}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// newReservationID returns "r_", 80 random bits, "_" and the sale id: the
// random part makes it unguessable, so an id seen in a URL grants nothing
// without the owner's token; the sale part says where its keys live.
func newReservationID(sale string) (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new reservation id: %w", err)
	}
	return "r_" + idEncoding.EncodeToString(b[:]) + "_" + sale, nil
}

// SaleOfReservation returns the sale a reservation id belongs to, or false
// when id is not a reservation id.
func SaleOfReservation(id string) (string, bool) {
	const random = 16 // 80 bits in base32
	rest, ok := strings.CutPrefix(id, "r_")
	if !ok || len(rest) < random+2 || rest[random] != '_' {
		return "", false
	}
	if _, err := idEncoding.DecodeString(rest[:random]); err != nil {
		return "", false
	}
	return rest[random+1:], true
}
