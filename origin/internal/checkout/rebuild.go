package checkout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// ErrRebuildInProgress: another rebuild of the sale holds the flag.
var ErrRebuildInProgress = errors.New("checkout: a rebuild of this sale is in progress")

// BeginRebuild sets the sale's rebuilding flag, which stops reserves and
// sweeps of the sale, for at most ttl (so a crashed rebuild cannot stop a
// sale for good), and returns the token that ends it. It fails with
// ErrRebuildInProgress when the flag is set.
func (s *Store) BeginRebuild(ctx context.Context, sale string, ttl time.Duration) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("begin rebuild of sale %s: %w", sale, err)
	}
	token := hex.EncodeToString(b[:])
	ok, err := s.rdb.SetNX(ctx, s.keys.Rebuilding(sale), token, ttl).Result()
	if err != nil {
		return "", fmt.Errorf("begin rebuild of sale %s: %w", sale, err)
	}
	if !ok {
		return "", fmt.Errorf("sale %s: %w", sale, ErrRebuildInProgress)
	}
	return token, nil
}

// EndRebuild clears the rebuilding flag if it is still the one token set
// (a rebuild that overran its flag's lifetime leaves a newer one alone).
func (s *Store) EndRebuild(ctx context.Context, sale, token string) error {
	if err := unleaseScript.Run(ctx, s.rdb, []string{s.keys.Rebuilding(sale)}, token).Err(); err != nil {
		return fmt.Errorf("end rebuild of sale %s: %w", sale, err)
	}
	return nil
}

// Burned is a spent admission token or idempotency key of an account, and
// the reservation it took.
type Burned struct {
	Account        string
	TokenID        string
	IdempotencyKey string
	ReservationID  string
}

// Rebuild replaces a sale's stock counters, hold index and account keys
// with what Postgres holds: stock per SKU, and the live (held or paid)
// reservations. Reservations Redis still shows as held but Postgres does
// not are given their Postgres status (settled, from Postgres's side).
// Burned tokens and idempotency keys are put back (Redis may have lost
// them: a replayed admission token must not take a second unit), with each
// account's count of holds taken (one per distinct reservation in burned),
// and the sale starts the given epoch with its sequence at zero. Run it between
// BeginRebuild and EndRebuild, after the intents have drained, so no write
// of Redis is lost by it.
func (s *Store) Rebuild(ctx context.Context, sale, epoch string, stock map[string]intent.Stock, live []intent.Reservation,
	settled map[string]intent.Status, burned []Burned) error {
	// SCAN is not routed by key: on Redis Cluster it must go to the node
	// that holds the sale's slot.
	node, err := s.nodeOf(ctx, s.keys.Meta(sale))
	if err != nil {
		return fmt.Errorf("rebuild sale %s: %w", sale, err)
	}
	var accounts []string
	iter := node.Scan(ctx, 0, s.keys.AccountPattern(sale), 1000).Iterator()
	for iter.Next(ctx) {
		accounts = append(accounts, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("rebuild sale %s: list accounts: %w", sale, err)
	}
	ttl := s.retention
	// Each account's count of holds taken (reserve.lua caps it) is put back
	// from the grants: one reservation each, however often a repeat was
	// journaled again.
	taken := make(map[string]map[string]bool)
	for _, b := range burned {
		if taken[b.Account] == nil {
			taken[b.Account] = make(map[string]bool)
		}
		taken[b.Account][b.ReservationID] = true
	}
	// Burned tokens first, in chunks outside the transaction: there may be
	// one per reservation the sale ever had, and while the rebuilding flag
	// is set nothing reads them.
	for len(burned) > 0 {
		n := min(len(burned), burnedChunk)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, b := range burned[:n] {
				acct := s.keys.Account(sale, b.Account)
				p.HSet(ctx, acct, acctTokenPrefix+b.TokenID, b.ReservationID, acctIdemPrefix+b.IdempotencyKey, b.ReservationID)
				if ids := taken[b.Account]; ids != nil {
					p.HSet(ctx, acct, acctHolds, len(ids))
					delete(taken, b.Account) // once per account
				}
				p.PExpire(ctx, acct, ttl)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("rebuild sale %s: burned tokens: %w", sale, err)
		}
		burned = burned[n:]
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for sku, c := range stock {
			key := s.keys.Inventory(sale, sku)
			p.Del(ctx, key)
			p.HSet(ctx, key, invTotal, c.Total, invAvailable, c.Available, invHeld, c.Held, invSold, c.Sold)
		}
		p.Del(ctx, s.keys.Holds(sale))
		// Accounts lose their live reservation (put back below from
		// Postgres) but keep their burned tokens and idempotency keys.
		for _, acct := range accounts {
			p.HDel(ctx, acct, acctRes, acctState)
		}
		for _, r := range live {
			res := s.keys.Reservation(sale, r.ID)
			p.HSet(ctx, res, resAccount, r.Account, resSKU, r.SKU, resStatus, string(r.Status),
				resExpiresMs, r.ExpiresAt.UnixMilli(), resCreatedMs, r.CreatedAt.UnixMilli(), resIdem, r.IdempotencyKey)
			// Its numbering was in an epoch now gone; Postgres has it.
			p.HDel(ctx, res, resEpoch, resSeq)
			if r.OrderID != "" {
				// Its payment has started: the grace was given (ExpiresAt
				// includes it) and must not be given again.
				p.HSet(ctx, res, resOrder, r.OrderID, resExtended, "1")
			}
			p.PExpire(ctx, res, ttl)
			if r.Status == intent.Held {
				p.ZAdd(ctx, s.keys.Holds(sale), redis.Z{Score: float64(r.ExpiresAt.UnixMilli()), Member: r.ID})
			}
			acct := s.keys.Account(sale, r.Account)
			p.HSet(ctx, acct, acctRes, r.ID, acctState, string(r.Status))
			p.PExpire(ctx, acct, ttl)
		}
		meta := s.keys.Meta(sale)
		p.Del(ctx, meta)
		p.HSet(ctx, meta, metaEpoch, epoch, metaSeq, 0)
		for id, status := range settled {
			// Only ids found in the hold index come here, so the hash
			// exists; its other fields stay as they are.
			res := s.keys.Reservation(sale, id)
			p.HSet(ctx, res, resStatus, string(status))
			p.PExpire(ctx, res, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild sale %s: %w", sale, err)
	}
	return nil
}

// nodeOf is the client of the server that holds key: on Redis Cluster the
// primary of its slot, else the one client.
func (s *Store) nodeOf(ctx context.Context, key string) (redis.UniversalClient, error) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the cluster node of %s: %w", key, err)
		}
		return node, nil
	}
	return s.rdb, nil
}

// HeldIDs returns the ids in a sale's hold index: the reservations Redis
// believes are held.
func (s *Store) HeldIDs(ctx context.Context, sale string) ([]string, error) {
	ids, err := s.rdb.ZRange(ctx, s.keys.Holds(sale), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read holds of sale %s: %w", sale, err)
	}
	return ids, nil
}

// burnedChunk bounds the burned tokens one rebuild round trip writes.
const burnedChunk = 1000

// ReplicationID returns the replication id of the Redis server that holds
// the sale (INFO replication's master_replid; on Redis Cluster, of the node
// holding the sale's slot): a failover or a restart changes it.
func (s *Store) ReplicationID(ctx context.Context, sale string) (string, error) {
	info, err := replidScript.Run(ctx, s.rdb, []string{s.keys.Meta(sale)}).Text()
	if err != nil {
		return "", fmt.Errorf("read redis replication id of sale %s: %w", sale, err)
	}
	for _, line := range strings.Split(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok {
			return id, nil
		}
	}
	return "", errors.New("read redis replication id: INFO replication has no master_replid")
}

// RebuildInProgress reports whether a rebuild of the sale holds its flag.
func (s *Store) RebuildInProgress(ctx context.Context, sale string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.keys.Rebuilding(sale)).Result()
	if err != nil {
		return false, fmt.Errorf("read rebuilding flag of sale %s: %w", sale, err)
	}
	return n == 1, nil
}
