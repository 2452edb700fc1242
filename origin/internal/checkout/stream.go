package checkout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// WriterGroup is the consumer group of order writers on every intents stream.
const WriterGroup = "writers"

// Entry is one stream entry: its intent, or the reason it could not be read.
type Entry struct {
	Intent intent.Intent
	Err    error // a malformed entry; it cannot be applied
}

// EnsureGroup creates the writers' group on a sale's stream (and the stream),
// reading from the stream's start. It is a no-op when the group exists.
func (s *Store) EnsureGroup(ctx context.Context, sale string) error {
	err := s.rdb.XGroupCreateMkStream(ctx, s.keys.Intents(sale), WriterGroup, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("create writer group for sale %s: %w", sale, err)
	}
	return nil
}

// ReadIntents reads up to count entries for consumer: its own unacknowledged
// entries when own is set (after a restart), else new ones, waiting up to
// block for them. A zero-length result means nothing arrived in time.
func (s *Store) ReadIntents(ctx context.Context, sale, consumer string, count int, block time.Duration, own bool) ([]Entry, error) {
	from := ">"
	if own {
		from = "0"
		block = -1 // reading one's own pending list never blocks
	}
	streams, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    WriterGroup,
		Consumer: consumer,
		Streams:  []string{s.keys.Intents(sale), from},
		Count:    int64(count),
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read intents of sale %s: %w", sale, err)
	}
	var out []Entry
	for _, st := range streams {
		out = append(out, entries(st.Messages)...)
	}
	return out, nil
}

// ClaimIntents takes over entries that another consumer read but did not
// acknowledge within minIdle (it crashed or hung), starting at cursor. It
// returns the entries and the cursor for the next call ("0-0" once the
// pending list has been walked through).
func (s *Store) ClaimIntents(ctx context.Context, sale, consumer string, minIdle time.Duration, count int, cursor string) ([]Entry, string, error) {
	msgs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   s.keys.Intents(sale),
		Group:    WriterGroup,
		Consumer: consumer,
		MinIdle:  minIdle,
		Start:    cursor,
		Count:    int64(count),
	}).Result()
	if err != nil {
		return nil, cursor, fmt.Errorf("claim intents of sale %s: %w", sale, err)
	}
	return entries(msgs), next, nil
}

// AckIntents acknowledges entries once their effect is committed.
func (s *Store) AckIntents(ctx context.Context, sale string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.rdb.XAck(ctx, s.keys.Intents(sale), WriterGroup, ids...).Err(); err != nil {
		return fmt.Errorf("ack intents of sale %s: %w", sale, err)
	}
	return nil
}

// PendingIntents returns, up to limit, the entries not yet acknowledged by
// the writers: those read but unacknowledged and those not yet delivered.
// It serves the ledger, which shows what Postgres still has to apply.
func (s *Store) PendingIntents(ctx context.Context, sale string, limit int) ([]Entry, error) {
	stream := s.keys.Intents(sale)
	groups, err := s.rdb.XInfoGroups(ctx, stream).Result()
	if err != nil {
		// No stream yet: nothing is pending. (go-redis strips the "ERR ".)
		if redis.HasErrorPrefix(err, "no such key") {
			return nil, nil
		}
		return nil, fmt.Errorf("read writer group of sale %s: %w", sale, err)
	}
	lastDelivered := "0-0"
	for _, g := range groups {
		if g.Name == WriterGroup {
			lastDelivered = g.LastDeliveredID
		}
	}
	var out []Entry
	pending, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: stream, Group: WriterGroup, Start: "-", End: "+", Count: int64(limit),
	}).Result()
	if err != nil && !redis.HasErrorPrefix(err, "NOGROUP") {
		return nil, fmt.Errorf("list pending intents of sale %s: %w", sale, err)
	}
	for _, p := range pending {
		msgs, err := s.rdb.XRangeN(ctx, stream, p.ID, p.ID, 1).Result()
		if err != nil {
			return nil, fmt.Errorf("read pending intent %s of sale %s: %w", p.ID, sale, err)
		}
		out = append(out, entries(msgs)...)
	}
	if len(out) < limit {
		msgs, err := s.rdb.XRangeN(ctx, stream, "("+lastDelivered, "+", int64(limit-len(out))).Result()
		if err != nil {
			return nil, fmt.Errorf("read undelivered intents of sale %s: %w", sale, err)
		}
		out = append(out, entries(msgs)...)
	}
	return out, nil
}

// EntryTime is when Redis added a stream entry, by Redis's clock: the unix
// milliseconds its id starts with (ids are "<ms>-<seq>").
func EntryTime(id string) (time.Time, error) {
	ms, _, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return time.Time{}, fmt.Errorf("stream entry id %q: want <ms>-<seq>", id)
	}
	return time.UnixMilli(n).UTC(), nil
}

func entries(msgs []redis.XMessage) []Entry {
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		in, err := intent.Parse(m.ID, m.Values)
		if err != nil {
			in.ID = m.ID
		}
		out = append(out, Entry{Intent: in, Err: err})
	}
	return out
}

// Lease is what Lease found.
type Lease int

const (
	// LeaseHeldByOther: another writer reads the stream.
	LeaseHeldByOther Lease = leaseHeldByOther
	// LeaseRenewed: the caller already held the lease.
	LeaseRenewed Lease = leaseRenewed
	// LeaseTaken: the lease was free and is now the caller's; whatever
	// another writer left unacknowledged is the caller's to apply first.
	LeaseTaken Lease = leaseTaken
)

// Lease takes or renews the lease on a sale's intents stream for consumer,
// for ttl. One writer at a time reads a sale's stream, so intents reach
// Postgres in stream order (out of order, a reserve could be refused for a
// hold whose expire another writer had not yet applied).
func (s *Store) Lease(ctx context.Context, sale, consumer string, ttl time.Duration) (Lease, error) {
	n, err := leaseScript.Run(ctx, s.rdb, []string{s.keys.WriterLease(sale)}, consumer, ttl.Milliseconds()).Int64()
	if err != nil {
		return LeaseHeldByOther, fmt.Errorf("writer lease of sale %s: %w", sale, err)
	}
	return Lease(n), nil
}

// Unlease gives the lease up if consumer holds it, so another writer can
// take over at once.
func (s *Store) Unlease(ctx context.Context, sale, consumer string) error {
	if err := unleaseScript.Run(ctx, s.rdb, []string{s.keys.WriterLease(sale)}, consumer).Err(); err != nil {
		return fmt.Errorf("give up writer lease of sale %s: %w", sale, err)
	}
	return nil
}
