package checkout

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/intent"
)

// The scripts write the hash and stream fields that keys.go and package
// intent name, and no others: the Go readers and the Lua writers agree.
func TestScriptsWriteTheNamedFields(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1)
	r := NewReserver(s, ReserverOptions{})
	defer r.Close()
	ctx := context.Background()
	res, err := r.Reserve(ctx, ReserveRequest{Sale: "s1", SKU: "a", Account: "u1", TokenID: "j1", IdempotencyKey: "k1", HoldTTL: time.Minute})
	if err != nil || res.Outcome != Created {
		t.Fatalf("Reserve = %+v, %v; want created", res, err)
	}
	if _, err := s.ExtendForPayment(ctx, "s1", Hold{ID: res.ReservationID, SKU: "a", Account: "u1"}, "o1", time.Minute); err != nil {
		t.Fatalf("ExtendForPayment = %v", err)
	}
	fields := func(key string) []string {
		t.Helper()
		m, err := s.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(m))
		for f := range m {
			out = append(out, f)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(names ...string) []string { slices.Sort(names); return names }
	for _, c := range []struct {
		name string
		key  string
		want []string
	}{
		{"reservation", s.keys.Reservation("s1", res.ReservationID), sorted(resAccount, resSKU, resStatus, resExpiresMs,
			resCreatedMs, resIdem, resJTI, resEpoch, resSeq, resOrder, resExtended)},
		{"account", s.keys.Account("s1", "u1"), sorted(acctRes, acctState, acctHolds, acctTokenPrefix+"j1", acctIdemPrefix+"k1")},
		{"inventory", s.keys.Inventory("s1", "a"), sorted(invTotal, invAvailable, invHeld, invSold, invFirstZeroMs, invZeroMs)}, // its one unit taken
		{"meta", s.keys.Meta("s1"), sorted(metaEpoch, metaSeq)},
	} {
		if got := fields(c.key); !slices.Equal(got, c.want) {
			t.Errorf("%s hash fields = %v, want %v", c.name, got, c.want)
		}
	}
	msgs, err := s.rdb.XRange(ctx, s.keys.Intents("s1"), "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("intents stream = %v, %v; want one entry", msgs, err)
	}
	var got []string
	for f := range msgs[0].Values {
		got = append(got, f)
	}
	slices.Sort(got)
	want := sorted(intent.FieldKind, intent.FieldReservation, intent.FieldAccount, intent.FieldSKU,
		intent.FieldIdempotency, intent.FieldExpiresMs, intent.FieldAtMs)
	if !slices.Equal(got, want) {
		t.Errorf("intent entry fields = %v, want %v", got, want)
	}
}

// reserve.lua finds an existing reservation's hash by putting its id in
// place of the new one at the end of the new reservation's key.
func TestReservationKeyEndsWithItsID(t *testing.T) {
	t.Parallel()
	k := NewKeys("fg:")
	for _, id := range []string{"r_0123456789abcdef_s1", "r_x_s1", ""} {
		key := k.Reservation("s1", id)
		if base, ok := strings.CutSuffix(key, id); !ok || base != k.Reservation("s1", "") {
			t.Errorf("Reservation(s1, %q) = %q, want %q followed by the id", id, key, k.Reservation("s1", ""))
		}
	}
}
