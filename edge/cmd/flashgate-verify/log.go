package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Log is a sale's admission log as the edge publishes it at
// GET /v1/sales/{sale_id}/admission-log (docs/API.md).
type Log struct {
	SaleID    string
	StartsAt  time.Time
	EndsAt    time.Time
	Draw      Draw
	Salt      string // hex
	Admission Admission
	Entries   []Entry
}

// Draw is the log's pre-queue draw.
type Draw struct {
	Algorithm  string `json:"algorithm"`
	Seed       string `json:"seed"`        // hex, revealed at the start
	SeedSHA256 string `json:"seed_sha256"` // hex, the commitment as the log states it
	PreQueue   int64  `json:"pre_queue"`   // n: the draw permutes places 1..n
}

// Admission is what the log says of the admission cursor's recorded
// moves: when it reached places, not who was admitted.
type Admission struct {
	ReachedThrough int64 `json:"reached_through"` // the last place the cursor reached before the end
	Steps          int   `json:"steps"`
	StepsCapped    bool  `json:"steps_capped"`
}

// Entry is one place handed out.
type Entry struct {
	Account   [32]byte // SHA-256(salt ‖ account)
	Pre       bool     // a pre-queue join, drawn from PreIndex
	PreIndex  int64
	Place     int64
	ReachedAt time.Time // when the admission cursor reached the place; zero: never
}

// entryJSON is an entry as the log spells it.
type entryJSON struct {
	AccountSHA256 string     `json:"account_sha256"`
	PreIndex      *int64     `json:"pre_index"`
	Place         int64      `json:"place"`
	ReachedAt     *time.Time `json:"reached_at"`
}

// Decode reads a log one entry at a time into Entries, about 80 bytes a
// place (Check needs about as much again).
func Decode(r io.Reader) (*Log, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	l := &Log{}
	fields := map[string]any{
		"sale_id": &l.SaleID, "starts_at": &l.StartsAt, "ends_at": &l.EndsAt,
		"draw": &l.Draw, "salt": &l.Salt, "admission": &l.Admission,
	}
	if err := delim(dec, '{'); err != nil {
		return nil, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read the log: %w", err)
		}
		key, _ := tok.(string)
		switch dst, ok := fields[key]; {
		case key == "entries":
			if err := l.decodeEntries(dec); err != nil {
				return nil, err
			}
		case ok:
			if err := dec.Decode(dst); err != nil {
				return nil, fmt.Errorf("read the log's %s: %w", key, err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("read the log's %s: %w", key, err)
			}
		}
	}
	if err := delim(dec, '}'); err != nil {
		return nil, err
	}
	if l.SaleID == "" {
		return nil, errors.New("read the log: it names no sale_id; is it an admission log?")
	}
	return l, nil
}

func (l *Log) decodeEntries(dec *json.Decoder) error {
	if err := delim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		var raw entryJSON
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("read entry %d of the log: %w", len(l.Entries)+1, err)
		}
		e := Entry{Place: raw.Place}
		if len(raw.AccountSHA256) != hex.EncodedLen(len(e.Account)) || hexInto(e.Account[:], raw.AccountSHA256) != nil {
			return fmt.Errorf("read entry %d of the log: account_sha256 %q is not 64 hex digits", len(l.Entries)+1, raw.AccountSHA256)
		}
		if raw.PreIndex != nil {
			e.Pre, e.PreIndex = true, *raw.PreIndex
		}
		if raw.ReachedAt != nil {
			e.ReachedAt = *raw.ReachedAt
		}
		l.Entries = append(l.Entries, e)
	}
	return delim(dec, ']')
}

// delim reads the JSON delimiter want.
func delim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("read the log: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("read the log: found %v where %q belongs", tok, want)
	}
	return nil
}

// hexInto decodes s, exactly len(dst) bytes of hex, into dst.
func hexInto(dst []byte, s string) error {
	_, err := hex.Decode(dst, []byte(s))
	return err
}
