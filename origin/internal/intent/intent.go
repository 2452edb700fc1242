// Package intent is the record that carries a change of stock from Redis,
// where it happens first, to Postgres, which has the last word.
//
// The reserve and release scripts append intents to a sale's Redis stream in
// the same atomic step as the change itself; the order writer reads them back
// and applies them to the ledger. An intent carries every field the ledger
// needs, so intents of one reservation may be applied in any order.
//
// The package also holds the vocabulary both sides share: a reservation's
// Status, the Reservation itself and a SKU's Stock (reservation.go), and the
// stream's field names.
package intent

import (
	"fmt"
	"strconv"
	"time"
)

// Kind names what happened to a reservation.
type Kind string

const (
	// Reserve: a unit moved from available to held.
	Reserve Kind = "reserve"
	// Expire: an unpaid hold ran out and its unit went back to available.
	Expire Kind = "expire"
	// Cancel: the shopper's payment failed; the hold was dropped at once and
	// its unit went back to available.
	Cancel Kind = "cancel"
	// Pay: the shopper paid for the hold; its unit moved from held to sold.
	Pay Kind = "pay"
)

// Effect is how the kind moves one SKU's counters.
func (k Kind) Effect() (available, held, sold int) {
	switch k {
	case Reserve:
		return -1, 1, 0
	case Expire, Cancel:
		return 1, -1, 0
	case Pay:
		return 0, -1, 1
	}
	return 0, 0, 0
}

// Intent is one entry of a sale's intents stream.
type Intent struct {
	ID             string // stream entry id; unique per sale, the ledger's dedupe key
	Kind           Kind
	ReservationID  string
	Account        string
	SKU            string
	IdempotencyKey string
	ExpiresAt      time.Time // when the hold runs out (as of this intent)
	At             time.Time // when the change happened, by Redis TIME
}

// The fields of an intents stream entry, as the Lua scripts of package
// checkout write them (XADD ... kind <kind> res <id> ...).
const (
	FieldKind        = "kind"
	FieldReservation = "res"
	FieldAccount     = "account"
	FieldSKU         = "sku"
	FieldIdempotency = "idem"
	FieldExpiresMs   = "expires_ms" // the hold's expiry as of the intent (unix ms)
	FieldAtMs        = "at_ms"      // when the change happened, by Redis TIME (unix ms)
)

// Parse turns a stream entry's fields into an Intent.
func Parse(id string, values map[string]any) (Intent, error) {
	str := func(name string) string {
		s, _ := values[name].(string)
		return s
	}
	ms := func(name string) (time.Time, error) {
		n, err := strconv.ParseInt(str(name), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("intent %s: field %s: %w", id, name, err)
		}
		return time.UnixMilli(n).UTC(), nil
	}
	in := Intent{
		ID:             id,
		Kind:           Kind(str(FieldKind)),
		ReservationID:  str(FieldReservation),
		Account:        str(FieldAccount),
		SKU:            str(FieldSKU),
		IdempotencyKey: str(FieldIdempotency),
	}
	switch in.Kind {
	case Reserve, Expire, Cancel, Pay:
	default:
		return Intent{}, fmt.Errorf("intent %s: unknown kind %q", id, in.Kind)
	}
	if in.ReservationID == "" || in.Account == "" || in.SKU == "" {
		return Intent{}, fmt.Errorf("intent %s: missing reservation, account or sku", id)
	}
	var err error
	if in.ExpiresAt, err = ms(FieldExpiresMs); err != nil {
		return Intent{}, err
	}
	if in.At, err = ms(FieldAtMs); err != nil {
		return Intent{}, err
	}
	return in, nil
}

// Grant is a reserve that Redis granted, as the reserve journal keeps it in
// Postgres before the shopper is answered: enough to put the hold back, and
// its burned admission token and idempotency key, should Redis lose it.
type Grant struct {
	Sale           string
	ReservationID  string
	Account        string
	SKU            string
	IdempotencyKey string
	TokenID        string // the admission token's jti
	// Epoch and Seq say where Redis numbered the grant: the sale's epoch
	// in Redis at the time, and the grant's place in that epoch.
	Epoch     string
	Seq       int64
	ExpiresAt time.Time
	CreatedAt time.Time
}

// JournalIDPrefix starts the id of an intent replayed from the journal, so
// it never meets a stream id (the ledger also dedupes by reservation and
// kind, so a reserve applied from the stream is not applied again).
const JournalIDPrefix = "journal:"

// Intent is the reserve intent the grant stands for.
func (g Grant) Intent() Intent {
	return Intent{
		ID: JournalIDPrefix + g.ReservationID, Kind: Reserve, ReservationID: g.ReservationID,
		Account: g.Account, SKU: g.SKU, IdempotencyKey: g.IdempotencyKey, ExpiresAt: g.ExpiresAt, At: g.CreatedAt,
	}
}
