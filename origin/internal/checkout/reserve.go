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

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// Outcome is what a reserve came to. Its values are the reserve script's
// codes, but for Rebuilding, which the script answers as codeRebuilding.
type Outcome int

const (
	// Created: a unit is now held for the account.
	Created Outcome = reserveCreated
	// Existing: the same token or idempotency key was seen before, or the
	// account already holds a unit; ReservationID names that reservation.
	Existing Outcome = reserveExisting
	// LimitReached: the account already bought its unit.
	LimitReached Outcome = reserveLimitReached
	// UnknownSKU: the SKU is not part of the sale (or not loaded).
	UnknownSKU Outcome = reserveUnknownSKU
	// SoldOut: no unit is available.
	SoldOut Outcome = reserveSoldOut
	// Rebuilding: the sale's Redis state is being rebuilt from Postgres;
	// nothing was taken, and the caller should try again shortly. (The
	// script answers codeRebuilding; 6 keeps the outcomes one to six.)
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

// Journal keeps granted reserves durably (the ledger's reserve journal in
// Postgres) before they are answered. It returns the ids of grants it would
// not keep because their epoch is no longer their sale's (Redis lost the
// sale meanwhile and a rebuild moved on): those are not promised.
type Journal interface {
	RecordGrants(ctx context.Context, grants []intent.Grant) (stale []string, err error)
}

// ErrNotDurable: Redis granted the reserve but it could not be made durable
// (the journal or the replicas did not confirm it), so it is not answered as
// granted; the caller should try again with the same token and idempotency
// key, which finds the same hold.
var ErrNotDurable = errors.New("checkout: the reserve could not be made durable")

// ReserverOptions tune how reserves are batched into Redis and made durable.
type ReserverOptions struct {
	// Pipelines is how many pipelines may be in flight at once; 0 means
	// DefaultPipelines.
	Pipelines int
	// MaxBatch caps the reserves sent in one pipeline; 0 means
	// DefaultMaxBatch.
	MaxBatch int
	// Timeout bounds one pipeline's round trip, with its journal write; 0
	// means 2 s.
	Timeout time.Duration
	// Journal, when set, records every granted reserve of a pipeline in one
	// write before any of them is answered. nil answers as soon as Redis
	// has the hold (a Redis that loses its data then loses the hold).
	Journal Journal
	// WaitReplicas, when above 0, ends each pipeline with WAIT for that
	// many replicas (up to WaitTimeout, 0 means DefaultWaitTimeout); a batch they do
	// not confirm is answered ErrNotDurable. Redis's WAIT is best effort: a
	// failover may still lose what it confirmed.
	WaitReplicas int
	WaitTimeout  time.Duration
}

// Reserver runs reserve scripts for many concurrent callers, a pipeline at a
// time: a caller's request joins whatever arrived while the previous
// pipeline was in flight, so under load one round trip carries many reserves
// and an idle system adds no wait at all.
//
// With a journal, the grants of a pipeline go on to a journal stage, which
// writes whatever pipelines have handed it meanwhile in one insert: the
// Redis pipelines never wait for Postgres, and a slow journal write makes
// the next one larger rather than queueing more of them.
type Reserver struct {
	store      *Store
	opts       ReserverOptions
	calls      chan *reserveCall
	toJournal  chan []*reserveCall // grants waiting for the journal; closed once the pipelines have stopped
	stop       chan struct{}
	exited     chan struct{} // closed once every worker has returned
	pipelines  sync.WaitGroup
	journalers sync.WaitGroup
	once       sync.Once
}

// maxJournalBatch caps the grants one journal write carries.
const maxJournalBatch = 2048

type reserveCall struct {
	ctx   context.Context
	req   ReserveRequest
	id    string
	res   ReserveResult
	grant intent.Grant // what the journal keeps, for Created
	err   error
	done  chan struct{}
}

// ErrReserverClosed is returned by Reserve after Close.
var ErrReserverClosed = errors.New("checkout: reserver closed")

// Defaults of ReserverOptions. The benchmarks and tests build a Reserver
// without a Config; the origin's Config starts from these.
const (
	DefaultPipelines   = 4
	DefaultMaxBatch    = 256
	DefaultWaitTimeout = 100 * time.Millisecond
)

// NewReserver starts the pipeline workers; Close stops them.
func NewReserver(store *Store, opts ReserverOptions) *Reserver {
	if opts.Pipelines <= 0 {
		opts.Pipelines = DefaultPipelines
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	r := &Reserver{
		store:     store,
		opts:      opts,
		calls:     make(chan *reserveCall, opts.Pipelines*opts.MaxBatch),
		toJournal: make(chan []*reserveCall, 2*opts.Pipelines),
		stop:      make(chan struct{}),
		exited:    make(chan struct{}),
	}
	r.pipelines.Add(opts.Pipelines)
	for range opts.Pipelines {
		go r.work()
	}
	if opts.Journal != nil {
		r.journalers.Add(opts.Pipelines)
		for range opts.Pipelines {
			go r.journalWork()
		}
	}
	go func() {
		r.pipelines.Wait()
		close(r.toJournal)
		r.journalers.Wait()
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
	defer r.pipelines.Done()
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

// run sends one batch in one pipeline, makes its grants durable, and hands
// each caller its answer.
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
	cmds, replicas := r.pipeline(ctx, live, reserveScript.EvalSha)
	var again []*reserveCall
	for i, c := range live {
		if noScript(cmds[i].Err()) {
			again = append(again, c)
			continue
		}
		r.read(c, cmds[i])
	}
	r.confirmReplicas(live, replicas)
	if len(again) > 0 {
		// An empty script cache (a restart or failover): EVAL loads it.
		cmds, replicas := r.pipeline(ctx, again, reserveScript.Eval)
		for i, cmd := range cmds {
			r.read(again[i], cmd)
		}
		r.confirmReplicas(again, replicas)
	}
	var grants []*reserveCall
	for _, c := range live {
		if r.opts.Journal != nil && granted(c) {
			grants = append(grants, c)
			continue
		}
		finish(c)
	}
	if len(grants) > 0 {
		r.toJournal <- grants
	}
}

// finish hands a call its answer.
func finish(c *reserveCall) {
	if c.err != nil {
		c.err = fmt.Errorf("reserve in sale %s: %w", c.req.Sale, c.err)
	}
	close(c.done)
}

// journalWork writes grants to the journal, each time all that the
// pipelines have handed over meanwhile, until the pipelines stop.
func (r *Reserver) journalWork() {
	defer r.journalers.Done()
	for calls := range r.toJournal {
	more:
		for len(calls) < maxJournalBatch {
			select {
			case next, ok := <-r.toJournal:
				if !ok {
					break more
				}
				calls = append(calls, next...)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
		r.journal(ctx, calls)
		cancel()
		for _, c := range calls {
			finish(c)
		}
	}
}

// read takes a script's reply into its call.
func (r *Reserver) read(c *reserveCall, cmd *redis.Cmd) {
	c.res, c.grant, c.err = reserveResult(cmd)
	if c.err == nil && c.res.Outcome == Created {
		g := &c.grant
		g.Sale, g.ReservationID, g.Account, g.SKU = c.req.Sale, c.res.ReservationID, c.req.Account, c.req.SKU
		g.IdempotencyKey, g.TokenID = c.req.IdempotencyKey, c.req.TokenID
	}
}

// granted reports whether a call's answer promises a hold.
func granted(c *reserveCall) bool {
	return c.err == nil && (c.res.Outcome == Created || c.res.Outcome == Existing)
}

// confirmReplicas fails the grants of a pipeline whose WAIT was not
// confirmed by enough replicas.
func (r *Reserver) confirmReplicas(calls []*reserveCall, replicas *redis.Cmd) {
	if replicas == nil {
		return
	}
	n, err := replicas.Int64()
	if err == nil && n >= int64(r.opts.WaitReplicas) {
		return
	}
	for _, c := range calls {
		if granted(c) {
			c.err = fmt.Errorf("%d of %d replicas confirmed (%v): %w", n, r.opts.WaitReplicas, err, ErrNotDurable)
		}
	}
}

// journal records the batch's grants in one write. A repeat (Existing) is
// journaled again too, from its reservation's hash: its first answer may
// have been ErrNotDurable, and this answer promises the hold as much as a
// 201 does. If the journal fails, no grant of the batch is answered as one.
func (r *Reserver) journal(ctx context.Context, calls []*reserveCall) {
	var grants []intent.Grant
	var repeats []*reserveCall
	for _, c := range calls {
		switch {
		case !granted(c):
		case c.res.Outcome == Created:
			grants = append(grants, c.grant)
		default:
			repeats = append(repeats, c)
		}
	}
	if len(repeats) > 0 {
		more, err := r.store.grants(ctx, repeats)
		if err != nil {
			failGrants(repeats, err)
			repeats = nil
		}
		grants = append(grants, more...)
	}
	if len(grants) == 0 {
		return
	}
	stale, err := r.opts.Journal.RecordGrants(ctx, grants)
	if err != nil {
		failGrants(calls, err)
		return
	}
	if len(stale) > 0 {
		gone := make(map[string]bool, len(stale))
		for _, id := range stale {
			gone[id] = true
		}
		for _, c := range calls {
			if granted(c) && gone[c.res.ReservationID] {
				c.err = fmt.Errorf("granted in an epoch Redis no longer has: %w", ErrNotDurable)
			}
		}
	}
}

func failGrants(calls []*reserveCall, err error) {
	for _, c := range calls {
		if granted(c) {
			c.err = fmt.Errorf("%w: %w", ErrNotDurable, err)
		}
	}
}

// grants reads what the journal keeps of the reservations that repeats
// found, from their hashes. Reservations whose hash predates the journal
// (no epoch) or is gone have nothing to add.
func (s *Store) grants(ctx context.Context, calls []*reserveCall) ([]intent.Grant, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(calls))
	for i, c := range calls {
		cmds[i] = pipe.HMGet(ctx, s.keys.Reservation(c.req.Sale, c.res.ReservationID),
			resAccount, resSKU, resIdem, resJTI, resEpoch, resSeq, resExpiresMs, resCreatedMs)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read repeated reservations: %w", err)
	}
	var out []intent.Grant
	for i, cmd := range cmds {
		v := cmd.Val()
		if toString(v[4]) == "" {
			continue
		}
		out = append(out, intent.Grant{
			Sale: calls[i].req.Sale, ReservationID: calls[i].res.ReservationID,
			Account: toString(v[0]), SKU: toString(v[1]), IdempotencyKey: toString(v[2]), TokenID: toString(v[3]),
			Epoch: toString(v[4]), Seq: toInt(v[5]),
			ExpiresAt: time.UnixMilli(toInt(v[6])).UTC(), CreatedAt: time.UnixMilli(toInt(v[7])).UTC(),
		})
	}
	return out, nil
}

func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

type evalFunc func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd

// pipeline sends one script run per call; each command carries its own
// reply or error (a connection error lands on every command). With
// WaitReplicas it ends with WAIT on the same connection, which covers the
// pipeline's writes; its command is returned (nil otherwise).
func (r *Reserver) pipeline(ctx context.Context, batch []*reserveCall, eval evalFunc) ([]*redis.Cmd, *redis.Cmd) {
	k := r.store.keys
	pipe := r.store.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		q := c.req
		cmds[i] = eval(ctx, pipe,
			[]string{
				k.Inventory(q.Sale, q.SKU), k.Account(q.Sale, q.Account), k.Reservation(q.Sale, c.id),
				k.Holds(q.Sale), k.Intents(q.Sale), k.Rebuilding(q.Sale), k.Meta(q.Sale),
			},
			c.id, q.Account, q.SKU, q.IdempotencyKey, q.TokenID, q.HoldTTL.Milliseconds(), r.store.retention.Milliseconds())
	}
	var replicas *redis.Cmd
	if r.opts.WaitReplicas > 0 {
		replicas = pipe.Do(ctx, "wait", r.opts.WaitReplicas, r.opts.WaitTimeout.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	return cmds, replicas
}

// reserveResult turns the script's {code, id, expires_ms[, seq, epoch,
// created_ms]} into a result, and for Created the grant's numbering.
func reserveResult(cmd *redis.Cmd) (ReserveResult, intent.Grant, error) {
	v, err := cmd.Slice()
	if err != nil {
		return ReserveResult{}, intent.Grant{}, err
	}
	if len(v) != 3 && len(v) != 6 {
		return ReserveResult{}, intent.Grant{}, fmt.Errorf("reserve script returned %d values, want 3 or 6", len(v))
	}
	code, _ := v[0].(int64)
	id, _ := v[1].(string)
	expires, _ := v[2].(int64)
	res := ReserveResult{Outcome: Outcome(code), ReservationID: id}
	var g intent.Grant
	switch code {
	case reserveCreated:
		if len(v) != 6 {
			return ReserveResult{}, intent.Grant{}, fmt.Errorf("reserve script returned %d values for a created hold, want 6", len(v))
		}
		res.ExpiresAt = time.UnixMilli(expires).UTC()
		g.Seq, _ = v[3].(int64)
		g.Epoch, _ = v[4].(string)
		created, _ := v[5].(int64)
		g.ExpiresAt, g.CreatedAt = res.ExpiresAt, time.UnixMilli(created).UTC()
	case reserveExisting, reserveLimitReached, reserveUnknownSKU, reserveSoldOut:
	case codeRebuilding:
		res.Outcome = Rebuilding
	default:
		return ReserveResult{}, intent.Grant{}, fmt.Errorf("reserve script returned unknown code %d", code)
	}
	return res, g, nil
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
