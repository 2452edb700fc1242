package defence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ops on the tarpit stream.
const (
	opCatch   = "catch"
	opRelease = "release"
)

// change is one entry of the tarpit stream.
type change struct {
	op string
	Entry
}

// store keeps the settings and the tarpit's changes in Redis (keys.go).
type store struct {
	rdb  redis.UniversalClient
	keys Keys
}

// settings reads the stored settings; false when there are none.
func (s store) settings(ctx context.Context) (Settings, bool, error) {
	b, err := s.rdb.Get(ctx, s.keys.Settings()).Bytes()
	if errors.Is(err, redis.Nil) {
		return Settings{}, false, nil
	}
	if err != nil {
		return Settings{}, false, fmt.Errorf("read defence settings: %w", err)
	}
	var st Settings
	if err := json.Unmarshal(b, &st); err != nil {
		return Settings{}, false, fmt.Errorf("decode defence settings: %w", err)
	}
	return st, true, nil
}

// change merges body into the newer of the stored settings and base (the
// node's copy: the stored ones are gone after Redis lost them) and stores
// the result one version up, in a transaction that starts again when
// another node changes them meanwhile.
func (s store) change(ctx context.Context, base Settings, body []byte) (Settings, error) {
	key := s.keys.Settings()
	var next Settings
	txf := func(tx *redis.Tx) error {
		cur := base
		b, err := tx.Get(ctx, key).Bytes()
		switch {
		case err == nil:
			var stored Settings
			if err := json.Unmarshal(b, &stored); err == nil && stored.Version >= cur.Version {
				cur = stored
			}
		case !errors.Is(err, redis.Nil):
			return fmt.Errorf("read defence settings: %w", err)
		}
		if next, err = cur.Merge(body); err != nil {
			return err
		}
		next.Version = cur.Version + 1
		out, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode defence settings: %w", err)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, out, 0)
			return nil
		})
		return err
	}
	for range 5 {
		err := s.rdb.Watch(ctx, txf, key)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		return next, err
	}
	return Settings{}, errBusy
}

// restore writes st back when Redis holds older settings or none (it lost
// them, or failed over to a replica that had not seen the last change),
// in a transaction that leaves newer ones alone.
func (s store) restore(ctx context.Context, st Settings) error {
	key := s.keys.Settings()
	out, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode defence settings: %w", err)
	}
	err = s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, key).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return fmt.Errorf("read defence settings: %w", err)
		default:
			var stored Settings
			if json.Unmarshal(b, &stored) == nil && stored.Version >= st.Version {
				return nil
			}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, out, 0)
			return nil
		})
		return err
	}, key)
	if errors.Is(err, redis.TxFailedErr) {
		return nil // changed meanwhile: the next sync reads it
	}
	return err
}

// append adds changes to the tarpit stream in one round trip.
func (s store) append(ctx context.Context, cs []change) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range cs {
			p.XAdd(ctx, &redis.XAddArgs{
				Stream: s.keys.Tarpit(), MaxLen: maxStreamLen, Approx: true,
				Values: []any{"op", c.op, "account", c.Account, "reason", c.Reason,
					"since_ms", c.Since.UnixMilli(), "until_ms", c.Until.UnixMilli()},
			})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write tarpit changes: %w", err)
	}
	return nil
}

// errBusy: other nodes kept changing the settings while this one tried.
var errBusy = errors.New("defence settings changed by others five times in a row; try again")

// readBatch bounds one XRANGE.
const readBatch = 10_000

// read returns the tarpit's changes after the stream id after ("" from the
// start) and the id of the last one read (after itself when none).
func (s store) read(ctx context.Context, after string) ([]change, string, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := s.rdb.XRangeN(ctx, s.keys.Tarpit(), start, "+", readBatch).Result()
	if err != nil {
		return nil, after, fmt.Errorf("read tarpit changes: %w", err)
	}
	out := make([]change, 0, len(msgs))
	for _, m := range msgs {
		after = m.ID
		str := func(k string) string { v, _ := m.Values[k].(string); return v }
		ms := func(k string) time.Time { n, _ := strconv.ParseInt(str(k), 10, 64); return time.UnixMilli(n) }
		out = append(out, change{op: str("op"), Entry: Entry{Account: str("account"), Reason: str("reason"),
			Since: ms("since_ms"), Until: ms("until_ms")}})
	}
	return out, after, nil
}
