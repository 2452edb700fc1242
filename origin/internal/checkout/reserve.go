package checkout

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/batch"
	"github.com/flashgate/flashgate/internal/redisscript"
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
	// HoldLimitReached: the account has no live hold and has taken as
	// many holds in the sale as ReserveRequest.MaxHolds allows.
	HoldLimitReached Outcome = reserveHoldLimit
	// Rebuilding: the sale's Redis state is being rebuilt from Postgres;
	// nothing was taken, and the caller should try again shortly. (The
	// script answers codeRebuilding; 7 keeps the outcomes one to seven.)
	Rebuilding Outcome = 7
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
	case HoldLimitReached:
		return "hold_limit_reached"
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
	// MaxHolds caps the holds the account may take in the sale, those
	// that ran out or were cancelled included; 0 means no cap.
	MaxHolds int
}

// ReserveResult is a reserve's answer.
type ReserveResult struct {
	Outcome       Outcome
	ReservationID string    // set for Created, Existing and LimitReached
	ExpiresAt     time.Time // set for Created
	// Reservation, for Existing, is the reservation the repeat found, as
	// Redis holds it, read in the same script run; nil when Redis no
	// longer holds its hash (its retention passed), and only the ledger
	// can tell. (A pointer: a created hold's answer stays small.)
	Reservation *intent.Reservation
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
	// Registerer, when set, takes flashgate_origin_redis_script_seconds
	// (script="reserve"); nil: the round trips are not observed.
	Registerer prometheus.Registerer
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
	store     *Store
	opts      ReserverOptions
	pipelines *batch.Batcher[*reserveCall]
	// journal takes the grants of each pipeline, as one item, so that a
	// pipeline's grants share a journal write; nil without a journal.
	journal *batch.Batcher[[]*reserveCall]
	times   scriptTimes
}

// maxJournalBatch caps the grants one journal write carries, roughly: it
// carries whole pipelines.
const maxJournalBatch = 2048

type reserveCall struct {
	ctx   context.Context
	req   ReserveRequest
	id    string
	res   ReserveResult
	grant intent.Grant // what the journal keeps, for Created and Existing
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
	r := &Reserver{store: store, opts: opts, times: newScriptTimes(opts.Registerer)}
	if opts.Journal != nil {
		r.journal = batch.New(batch.Options{
			Workers:  opts.Pipelines,
			MaxBatch: max(maxJournalBatch/opts.MaxBatch, 1),
			Queue:    2 * opts.Pipelines, // more would let Redis grant far ahead of a slow journal
		}, r.journalRun)
	}
	r.pipelines = batch.New(batch.Options{Workers: opts.Pipelines, MaxBatch: opts.MaxBatch}, r.run)
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
	if err := r.pipelines.Submit(ctx, c); err != nil {
		if errors.Is(err, batch.ErrClosed) {
			return ReserveResult{}, ErrReserverClosed
		}
		return ReserveResult{}, err
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// The script may still run; its hold is found again by the
		// idempotency key, and otherwise expires like any unpaid hold.
		return ReserveResult{}, ctx.Err()
	}
}

// Close stops taking reserves, finishes the ones already queued (their
// journal writes included), and waits for the workers to end.
func (r *Reserver) Close() {
	r.pipelines.Close()
	if r.journal != nil {
		r.journal.Close() // after the pipelines: they hand it their last grants
	}
}

// run sends one batch in one pipeline, hands its grants to the journal
// stage, and answers the rest.
func (r *Reserver) run(calls []*reserveCall) {
	live := calls[:0:0]
	for _, c := range calls {
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
	sent := time.Now()
	cmds, confirmed := r.pipeline(ctx, live)
	if o := r.times.reserve; o != nil {
		rt := time.Since(sent).Seconds()
		for range live {
			o.Observe(rt)
		}
	}
	var grants []*reserveCall
	for i, c := range live {
		r.read(c, cmds[i])
		if granted(c) && confirmed != nil {
			c.err = confirmed
		}
		if r.journal != nil && granted(c) {
			grants = append(grants, c)
			continue
		}
		finish(c)
	}
	if len(grants) > 0 {
		// The journal closes only after the pipelines: it takes these.
		if err := r.journal.Submit(context.Background(), grants); err != nil {
			for _, c := range grants {
				c.err = err
				finish(c)
			}
		}
	}
}

// finish hands a call its answer.
func finish(c *reserveCall) {
	if c.err != nil {
		c.err = fmt.Errorf("reserve in sale %s: %w", c.req.Sale, c.err)
	}
	close(c.done)
}

// journalRun writes the grants of the pipelines in hand to the journal in
// one write, then answers them.
func (r *Reserver) journalRun(pipelines [][]*reserveCall) {
	calls := pipelines[0]
	for _, more := range pipelines[1:] {
		calls = append(calls, more...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	r.record(ctx, calls)
	for _, c := range calls {
		finish(c)
	}
}

// read takes a script's reply into its call.
func (r *Reserver) read(c *reserveCall, cmd *redis.Cmd) {
	c.res, c.grant, c.err = reserveResult(cmd)
	if c.err != nil {
		return
	}
	g := &c.grant
	g.Sale, g.ReservationID = c.req.Sale, c.res.ReservationID
	switch c.res.Outcome {
	case Created:
		g.Account, g.SKU, g.IdempotencyKey, g.TokenID = c.req.Account, c.req.SKU, c.req.IdempotencyKey, c.req.TokenID
	case Existing:
		if c.res.Reservation != nil {
			c.res.Reservation.Sale = c.req.Sale
		}
	}
}

// granted reports whether a call's answer promises a hold.
func granted(c *reserveCall) bool {
	return c.err == nil && (c.res.Outcome == Created || c.res.Outcome == Existing)
}

// record journals the grants of calls in one write. A repeat (Existing) is
// journaled again too, from its reservation's hash as the script returned
// it: its first answer may have been ErrNotDurable, and this answer
// promises the hold as much as a 201 does. A reservation whose hash was
// gone, or predates the journal (no epoch), has nothing to add. If the
// journal fails, no grant of the batch is answered as one.
func (r *Reserver) record(ctx context.Context, calls []*reserveCall) {
	var grants []intent.Grant
	for _, c := range calls {
		if granted(c) && c.grant.Epoch != "" {
			grants = append(grants, c.grant)
		}
	}
	if len(grants) == 0 {
		return
	}
	stale, err := r.opts.Journal.RecordGrants(ctx, grants)
	if err != nil {
		for _, c := range calls {
			if granted(c) {
				c.err = fmt.Errorf("%w: %w", ErrNotDurable, err)
			}
		}
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

// pipeline sends one script run per call; each command carries its own
// reply or error (a connection error lands on every command). With
// WaitReplicas each pipeline sent ends with WAIT on the same connection,
// which covers its writes; confirmed is not nil when a WAIT fell short, and
// then no grant of the batch is durable.
func (r *Reserver) pipeline(ctx context.Context, calls []*reserveCall) (cmds []*redis.Cmd, confirmed error) {
	k := r.store.keys
	item := func(i int) ([]string, []any) {
		c := calls[i]
		q := c.req
		return []string{
				k.Inventory(q.Sale, q.SKU), k.Account(q.Sale, q.Account), k.Reservation(q.Sale, c.id),
				k.Holds(q.Sale), k.Intents(q.Sale), k.Rebuilding(q.Sale), k.Meta(q.Sale),
			},
			[]any{c.id, q.Account, q.SKU, q.IdempotencyKey, q.TokenID, q.HoldTTL.Milliseconds(), r.store.retention.Milliseconds(), q.MaxHolds}
	}
	if r.opts.WaitReplicas <= 0 {
		return redisscript.Each(ctx, r.store.rdb, reserveScript, len(calls), item), nil
	}
	var waits [2]*redis.Cmd // one per pipeline sent: EVALSHA, and EVAL after NOSCRIPT
	sent := 0
	cmds = redisscript.EachThen(ctx, r.store.rdb, reserveScript, len(calls), item, func(pipe redis.Pipeliner) {
		waits[sent] = pipe.Do(ctx, "wait", r.opts.WaitReplicas, r.opts.WaitTimeout.Milliseconds())
		sent++
	})
	for _, w := range waits[:sent] {
		if n, err := w.Int64(); err != nil || n < int64(r.opts.WaitReplicas) {
			return cmds, fmt.Errorf("%d of %d replicas confirmed (%v): %w", n, r.opts.WaitReplicas, err, ErrNotDurable)
		}
	}
	return cmds, nil
}

// The positions in reserve.lua's reply. Every reply has the first three;
// Created's goes on to replyCreatedMs, and Existing's, when Redis still
// holds the reservation's hash, to replyOrder.
const (
	replyCode = iota
	replyID
	replyExpiresMs
	replySeq
	replyEpoch
	replyCreatedMs
	replyStatus
	replyAccount
	replySKU
	replyIdem
	replyJTI
	replyOrder

	replyShort    = replyExpiresMs + 1
	replyCreated  = replyCreatedMs + 1
	replyExisting = replyOrder + 1
)

// reserveResult turns the script's reply into a result, and for Created
// and Existing (when the hash was there) the grant's numbering and times;
// for Existing also the grant's account, SKU, idempotency key and token,
// which are the first reserve's.
func reserveResult(cmd *redis.Cmd) (ReserveResult, intent.Grant, error) {
	v, err := cmd.Slice()
	if err != nil {
		return ReserveResult{}, intent.Grant{}, err
	}
	if len(v) != replyShort && len(v) != replyCreated && len(v) != replyExisting {
		return ReserveResult{}, intent.Grant{}, fmt.Errorf("reserve script returned %d values, want %d, %d or %d", len(v), replyShort, replyCreated, replyExisting)
	}
	code, _ := v[replyCode].(int64)
	id, _ := v[replyID].(string)
	res := ReserveResult{Outcome: Outcome(code), ReservationID: id}
	var g intent.Grant
	if len(v) >= replyCreated {
		expires, _ := v[replyExpiresMs].(int64)
		created, _ := v[replyCreatedMs].(int64)
		g.Seq, _ = v[replySeq].(int64)
		g.Epoch, _ = v[replyEpoch].(string)
		g.ExpiresAt, g.CreatedAt = time.UnixMilli(expires).UTC(), time.UnixMilli(created).UTC()
	}
	switch {
	case code == reserveCreated && len(v) == replyCreated:
		res.ExpiresAt = g.ExpiresAt
	case code == reserveCreated:
		return ReserveResult{}, intent.Grant{}, fmt.Errorf("reserve script returned %d values for a created hold, want %d", len(v), replyCreated)
	case code == reserveExisting && len(v) == replyExisting:
		str := func(i int) string { s, _ := v[i].(string); return s }
		g.Account, g.SKU, g.IdempotencyKey, g.TokenID = str(replyAccount), str(replySKU), str(replyIdem), str(replyJTI)
		res.Reservation = &intent.Reservation{
			ID: id, Account: g.Account, SKU: g.SKU, Status: intent.Status(str(replyStatus)), OrderID: str(replyOrder),
			IdempotencyKey: g.IdempotencyKey, ExpiresAt: g.ExpiresAt, CreatedAt: g.CreatedAt,
		}
	case code == reserveExisting && len(v) == replyShort:
	case len(v) != replyShort:
		return ReserveResult{}, intent.Grant{}, fmt.Errorf("reserve script returned %d values for code %d, want %d", len(v), code, replyShort)
	case code == reserveLimitReached, code == reserveUnknownSKU, code == reserveSoldOut, code == reserveHoldLimit:
	case code == codeRebuilding:
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
