package defence

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
)

// ErrNotTarpitted: a release names nothing the tarpit holds.
var ErrNotTarpitted = errors.New("not in the tarpit")

// Options configure Defences; zero values take the defaults.
type Options struct {
	// Defaults are the settings until ops change them (DefaultSettings).
	Defaults Settings
	Clock    clock.Clock  // nil means clock.Real
	Log      *slog.Logger // nil: slog.Default()
	Registry prometheus.Registerer
}

// maxPending bounds the catches a node keeps while Redis does not take
// them; beyond it, a catch holds on this node only.
const maxPending = 10_000

// Defences are one edge node's share of the defences: the settings in
// force, the tarpit's copy, and the watch that catches misbehaving
// accounts and addresses. Safe for concurrent use; calling Sync every
// second keeps it in step with the other nodes.
type Defences struct {
	store    store
	opts     Options
	settings atomic.Pointer[Settings]
	tarpit   *tarpit
	watch    *watch
	m        metrics

	mu      sync.Mutex // guards pending and after
	pending []change   // this node's catches not yet in Redis
	after   string     // the last tarpit stream id read
}

type metrics struct {
	caught     *prometheus.CounterVec // by reason
	offences   *prometheus.CounterVec // by reason
	lowTrust   *prometheus.CounterVec // by rule
	answers    prometheus.Counter
	syncErrors prometheus.Counter
	resets     prometheus.Counter
}

// New returns a node's defences over Redis client rdb with keys under
// prefix, holding opts.Defaults until Sync reads newer settings.
func New(rdb redis.UniversalClient, prefix string, opts Options) *Defences {
	opts.Clock = clock.Or(opts.Clock)
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	d := &Defences{store: store{rdb: rdb, keys: NewKeys(prefix)}, opts: opts, tarpit: newTarpit()}
	st := opts.Defaults
	d.settings.Store(&st)
	d.m = metrics{
		caught: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashgate_edge_tarpit_caught_total",
			Help: "Accounts this node put in the tarpit, by reason."}, []string{"reason"}),
		offences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashgate_edge_offences_total",
			Help: "Refusals counted against an account towards the tarpit, by reason (the limit, or the challenge's refusal)."}, []string{"reason"}),
		lowTrust: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashgate_edge_low_trust_joins_total",
			Help: "Joins from accounts the shop's signals mark as low trust, asked a harder proof of work, by the rule that marked them."}, []string{"rule"}),
		answers: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_tarpit_answers_total",
			Help: "Status polls of tarpitted shoppers whose place had come, answered as waiting instead of admitted."}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_defences_sync_errors_total",
			Help: "Rounds in which the node could not read or write the shared defences in Redis."}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashgate_edge_offence_watch_resets_total",
			Help: "Times a shard of the node's offence and accounts-per-address counts filled up and forgot everything."}),
	}
	d.watch = newWatch(d.m.resets.Inc)
	if opts.Registry != nil {
		opts.Registry.MustRegister(d.m.caught, d.m.offences, d.m.lowTrust, d.m.answers, d.m.syncErrors, d.m.resets,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashgate_edge_tarpit_entries",
				Help: "Entries in this node's copy of the tarpit (expired ones until the next sync)."},
				func() float64 { return float64(d.tarpit.size.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashgate_edge_defences_version",
				Help: "The version of the defence settings this node applies."},
				func() float64 { return float64(d.Settings().Version) }))
	}
	return d
}

// Settings returns the settings in force on this node.
func (d *Defences) Settings() Settings { return *d.settings.Load() }

// Change applies an admin change, the JSON object body, to every node: it
// is merged into the settings and stored in Redis, where the other nodes
// read it at their next Sync. Errors wrapping ErrInvalid are the body's
// fault; any other is Redis's, and nothing changed.
func (d *Defences) Change(ctx context.Context, body []byte) (Settings, error) {
	if _, err := d.Settings().Merge(body); err != nil {
		return Settings{}, err // refused before asking Redis
	}
	next, err := d.store.change(ctx, d.Settings(), body)
	if err != nil {
		return Settings{}, err
	}
	d.adopt(next)
	return next, nil
}

// adopt takes st when it is newer than the settings in force, or as new
// but different: two changes made on either side of a Redis failover can
// share a version, and every node then takes the one Redis holds.
func (d *Defences) adopt(st Settings) {
	for {
		cur := d.settings.Load()
		if st.Version < cur.Version || st == *cur || d.settings.CompareAndSwap(cur, &st) {
			return
		}
	}
}

// LowTrust reports whether the shop's signals sig mark an account as low
// trust, and how many bits harder its proof of work is then.
func (d *Defences) LowTrust(sig tokens.Signals) (bool, int) {
	rules := d.Settings().Trust
	low, rule := rules.LowTrust(sig, d.opts.Clock.Now())
	if !low || rules.ExtraChallengeBits == 0 {
		return false, 0
	}
	d.m.lowTrust.WithLabelValues(rule).Inc()
	return true, rules.ExtraChallengeBits
}

// Tarpitted reports whether the account of a shopper whose place has come
// is to be kept waiting: it is in the tarpit, and the tarpit is on. Free
// while the tarpit is empty.
func (d *Defences) Tarpitted(account string) bool {
	if !d.tarpit.holds(account, d.opts.Clock.Now()) || !d.Settings().Tarpit.Enabled {
		return false
	}
	d.m.answers.Inc()
	return true
}

// Offence counts a refusal (reason: the limit that refused, or why a proof
// of work was refused) against account, and tarpits the account when it
// has earned the settings' number of them within OffenceWindow.
func (d *Defences) Offence(account, reason string) {
	d.m.offences.WithLabelValues(reason).Inc()
	rules := d.Settings().Tarpit
	if !rules.Enabled || rules.Offences == 0 {
		return
	}
	if d.watch.offence(account, rules.Offences, d.opts.Clock.Now()) {
		d.catch(account, ReasonOffences, rules)
	}
}

// Joined records that account holds a place in sale and joined from
// client, whose per-address key is addressKey ("" and the zero address
// when the client could not be named: a proxy's address is nobody's). When
// more accounts than the settings allow joined the sale from the address,
// or from its network, within OffenceWindow, they all go to the tarpit:
// the accounts, so that they cannot leave it by polling from elsewhere,
// and not the address, so that whoever joins from it afterwards starts
// afresh.
func (d *Defences) Joined(sale, account, addressKey string, client netip.Addr) {
	rules := d.Settings().Tarpit
	if !rules.Enabled || addressKey == "" {
		return
	}
	now := d.opts.Clock.Now()
	if n := rules.AccountsPerAddress; n > 0 {
		for _, a := range d.watch.joined(sale, "a:"+addressKey, account, n, now) {
			d.catch(a, ReasonAccountsPerAddress, rules)
		}
	}
	if n := rules.AccountsPerNetwork; n > 0 && client.IsValid() {
		for _, a := range d.watch.joined(sale, "n:"+Network(client).String(), account, n, now) {
			d.catch(a, ReasonAccountsPerNetwork, rules)
		}
	}
}

// catch puts account in the tarpit on this node at once, and in Redis for
// the others at the next sync.
func (d *Defences) catch(account, reason string, rules TarpitRules) {
	now := d.opts.Clock.Now()
	e := Entry{Account: account, Reason: reason, Since: now, Until: now.Add(time.Duration(rules.HoldS) * time.Second)}
	d.tarpit.put(e)
	d.m.caught.WithLabelValues(reason).Inc()
	d.opts.Log.Debug("tarpit: caught", "account", account, "reason", reason, "until", e.Until)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) < maxPending {
		d.pending = append(d.pending, change{op: opCatch, Entry: e})
	}
}

// List returns what the tarpit holds, oldest first.
func (d *Defences) List() []Entry { return d.tarpit.list(d.opts.Clock.Now()) }

// Release takes account out of the tarpit on every node, and keeps any
// catch of it made before now from bringing it back. This node first
// catches up with the others, so it releases what any of them caught; an
// error wrapping ErrNotTarpitted when none holds it, another when Redis
// does not take the release (then nothing changed).
func (d *Defences) Release(ctx context.Context, account string) (Entry, error) {
	if err := d.Sync(ctx); err != nil {
		return Entry{}, err
	}
	now := d.opts.Clock.Now()
	if !d.tarpit.holds(account, now) {
		return Entry{}, ErrNotTarpitted
	}
	if err := d.store.append(ctx, []change{{op: opRelease, Entry: Entry{Account: account, Since: now, Until: now}}}); err != nil {
		return Entry{}, err
	}
	e, _ := d.tarpit.remove(account, now)
	d.mu.Lock()
	// A catch of this account not yet written would come back at the next sync.
	d.pending = slices.DeleteFunc(d.pending, func(c change) bool { return c.Account == account })
	d.mu.Unlock()
	d.opts.Log.Info("tarpit: released", "account", account)
	return e, nil
}

// Sync is one round: this node's catches go to Redis, the settings and the
// others' tarpit changes come from it, and expired entries go.
func (d *Defences) Sync(ctx context.Context) error {
	err := d.sync(ctx)
	if err != nil {
		d.m.syncErrors.Inc()
	}
	d.tarpit.purge(d.opts.Clock.Now())
	return err
}

func (d *Defences) sync(ctx context.Context) error {
	d.mu.Lock()
	pending := d.pending
	d.pending = nil
	d.mu.Unlock()
	if len(pending) > 0 {
		if err := d.store.append(ctx, pending); err != nil {
			d.mu.Lock()
			d.pending = append(pending, d.pending...)[:min(len(pending)+len(d.pending), maxPending)]
			d.mu.Unlock()
			return err
		}
	}
	st, ok, err := d.store.settings(ctx)
	switch {
	case err != nil:
		return err
	case ok && st.Version < d.Settings().Version, !ok && d.Settings().Version > 0:
		// Redis lost what ops set, or holds an older change: put this
		// node's copy back.
		if err := d.store.restore(ctx, d.Settings()); err != nil {
			return err
		}
	case ok:
		d.adopt(st)
	}
	for {
		d.mu.Lock()
		after := d.after
		d.mu.Unlock()
		changes, next, err := d.store.read(ctx, after)
		if err != nil {
			return err
		}
		for _, c := range changes {
			switch c.op {
			case opCatch:
				d.tarpit.put(c.Entry)
			case opRelease:
				d.tarpit.remove(c.Account, c.Since)
			}
		}
		d.mu.Lock()
		d.after = next
		d.mu.Unlock()
		if len(changes) < readBatch {
			return nil
		}
	}
}

// MaxExtendedBits bounds the difficulty the challenge ramp and the trust
// rules raise a sale's to: 2^22 hashes take a mid-range phone about 25 s on
// average, and 1 in 20 about 75 s, within a challenge's two minutes. Ops
// may set a sale harder still.
const MaxExtendedBits = 22

// Difficulty is the proof of work a join needs now, in leading zero bits:
// the sale's (saleBits; 0 asks none), raised while joins come fast (the
// challenge ramp; joinRate, the sale's joins a second, is asked only while
// the ramp is on), and for a low-trust account (sig; nil for what every
// account needs, as the sale's published challenge asks) the trust rules'
// extra bits — some even when the sale asks none.
func (d *Defences) Difficulty(saleBits int, joinRate func() float64, sig *tokens.Signals) int {
	bits := max(saleBits, 0)
	st := d.Settings()
	extra := 0
	if bits > 0 && st.Ramp.JoinsPerS > 0 && joinRate != nil {
		extra += st.Ramp.ExtraBits(joinRate())
	}
	if sig != nil {
		if low, more := d.LowTrust(*sig); low {
			extra += more
		}
	}
	return max(bits, min(bits+extra, MaxExtendedBits))
}
