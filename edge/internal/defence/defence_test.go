package defence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/tokens"
)

// nodes are n edge nodes' defences sharing one Redis prefix and clock.
func nodes(t *testing.T, n int, st defence.Settings) ([]*defence.Defences, *clock.Fake, *testenv.Redis) {
	t.Helper()
	r := testenv.NewRedis(t, testenv.RedisURL())
	c := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	out := make([]*defence.Defences, n)
	for i := range out {
		out[i] = defence.New(r.Client, r.Prefix, defence.Options{Defaults: st, Clock: c})
	}
	return out, c, r
}

func defaults() defence.Settings { return defence.DefaultSettings("1200-M", "300-S") }

func syncAll(t *testing.T, ds ...*defence.Defences) {
	t.Helper()
	for _, d := range ds {
		if err := d.Sync(context.Background()); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
}

var client = netip.MustParseAddr("192.0.2.7")

// TestOffencesTarpitOnEveryNode: an account that keeps earning refusals on
// one node waits on every node once they have synced, until ops release it
// or its hold ends; a catch made before a release does not bring it back.
func TestOffencesTarpitOnEveryNode(t *testing.T) {
	st := defaults()
	st.Tarpit.Offences = 3
	ds, clk, _ := nodes(t, 2, st)
	a, b := ds[0], ds[1]
	for range 2 {
		a.Offence("mallory", "poll_account")
	}
	if a.Tarpitted("mallory") {
		t.Fatal("tarpitted after 2 offences, want after 3")
	}
	a.Offence("mallory", "poll_account")
	if !a.Tarpitted("mallory") {
		t.Fatal("not tarpitted on its own node after 3 offences")
	}
	if b.Tarpitted("mallory") {
		t.Fatal("the other node knew before any sync")
	}
	syncAll(t, a, b)
	if !b.Tarpitted("mallory") {
		t.Fatal("the other node does not tarpit mallory after syncing")
	}
	if b.Tarpitted("alice") {
		t.Fatal("alice tarpitted")
	}
	if got := b.List(); len(got) != 1 || got[0].Account != "mallory" || got[0].Reason != defence.ReasonOffences {
		t.Fatalf("List = %+v, want mallory for offences", got)
	}

	if _, err := b.Release(context.Background(), "nobody"); !errors.Is(err, defence.ErrNotTarpitted) {
		t.Fatalf("Release(nobody) = %v, want ErrNotTarpitted", err)
	}
	// A catch of mallory the other node made before the release, still
	// waiting to be written, does not bring it back.
	for range 3 {
		a.Offence("mallory", "poll_account")
	}
	clk.Advance(time.Second)
	if _, err := b.Release(context.Background(), "mallory"); err != nil {
		t.Fatal(err)
	}
	syncAll(t, a, b, a, b)
	if a.Tarpitted("mallory") || b.Tarpitted("mallory") {
		t.Fatal("mallory still tarpitted after the release")
	}

	// Caught again, it is held for HoldS, then let go.
	clk.Advance(time.Second)
	for range 3 {
		a.Offence("mallory", "challenge_unsolved")
	}
	syncAll(t, a, b)
	clk.Advance(time.Duration(st.Tarpit.HoldS-1) * time.Second)
	if !b.Tarpitted("mallory") {
		t.Fatal("let go before the hold ended")
	}
	clk.Advance(time.Second)
	syncAll(t, b)
	if b.Tarpitted("mallory") || len(b.List()) != 0 {
		t.Fatalf("still held after the hold: %+v", b.List())
	}
}

// TestReleaseReachesWhatOthersCaught: a node that has not synced since
// another caught an account still releases it.
func TestReleaseReachesWhatOthersCaught(t *testing.T) {
	st := defaults()
	st.Tarpit.Offences = 3
	ds, _, _ := nodes(t, 2, st)
	a, b := ds[0], ds[1]
	for range 3 {
		a.Offence("mallory", "join_account")
	}
	syncAll(t, a)
	if _, err := b.Release(context.Background(), "mallory"); err != nil {
		t.Fatalf("Release on a node that had not synced = %v", err)
	}
	syncAll(t, a)
	if a.Tarpitted("mallory") {
		t.Fatal("the catching node still holds mallory")
	}
}

// TestAccountsPerAddress: the accounts beyond the limit that join one sale
// from one address within the window put every one of them in the
// tarpit — not the address: whoever joins from it afterwards starts
// afresh — and a network rule likewise for a network.
func TestAccountsPerAddress(t *testing.T) {
	st := defaults()
	st.Tarpit.AccountsPerAddress = 4
	st.Tarpit.AccountsPerNetwork = 6
	ds, clk, _ := nodes(t, 1, st)
	d := ds[0]
	for _, acct := range []string{"a1", "a2", "a3", "a4", "a1", "a2"} { // rejoins count once
		d.Joined("s1", acct, "192.0.2.7", client)
	}
	d.Joined("s2", "a5", "192.0.2.7", client) // another sale's count
	if d.Tarpitted("a1") {
		t.Fatal("tarpitted at 4 accounts, the limit")
	}
	d.Joined("s1", "a5", "192.0.2.7", client)
	for _, a := range []string{"a1", "a2", "a3", "a4", "a5"} {
		if !d.Tarpitted(a) {
			t.Errorf("%s not tarpitted by the 5th account of the address", a)
		}
	}
	d.Joined("s1", "later", "192.0.2.7", client)
	if d.Tarpitted("later") {
		t.Fatal("an account joining from the address afterwards is held")
	}
	// The network: a 7th account of another sale from 192.0.2.0/24.
	for i := range 6 {
		addr := netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", 10+i))
		d.Joined("s5", fmt.Sprintf("n%d", i), addr.String(), addr)
	}
	if d.Tarpitted("n0") {
		t.Fatal("tarpitted at the network's limit")
	}
	d.Joined("s5", "n6", "192.0.2.99", netip.MustParseAddr("192.0.2.99"))
	if !d.Tarpitted("n0") || !d.Tarpitted("n6") {
		t.Fatal("7 accounts from 192.0.2.0/24 did not tarpit them")
	}
	// A window is ten minutes from a place's first join, not a shard's.
	clk.Advance(defence.OffenceWindow)
	for i := range 5 {
		d.Joined("s3", fmt.Sprintf("w%d", i), "198.51.100.1", netip.MustParseAddr("198.51.100.1"))
		clk.Advance(defence.OffenceWindow / 10)
	}
	if !d.Tarpitted("w0") {
		t.Fatal("5 accounts within the window from one address not caught")
	}
	// An unnamed client (a proxy's own address) is nobody's address.
	for i := range 6 {
		d.Joined("s4", fmt.Sprintf("p%d", i), "", netip.Addr{})
	}
	if d.Tarpitted("p0") {
		t.Fatal("accounts caught on an unnamed address")
	}
}

// TestTarpitSwitchedOff: with the tarpit off nobody is caught and nobody
// held waits.
func TestTarpitSwitchedOff(t *testing.T) {
	st := defaults()
	st.Tarpit.Offences = 3
	ds, _, _ := nodes(t, 1, st)
	d := ds[0]
	for range 3 {
		d.Offence("mallory", "join_account")
	}
	if !d.Tarpitted("mallory") {
		t.Fatal("not caught with the tarpit on")
	}
	if _, err := d.Change(context.Background(), []byte(`{"tarpit": {"enabled": false}}`)); err != nil {
		t.Fatal(err)
	}
	if d.Tarpitted("mallory") {
		t.Fatal("held with the tarpit off")
	}
	for range 3 {
		d.Offence("eve", "join_account")
	}
	if _, err := d.Change(context.Background(), []byte(`{"tarpit": {"enabled": true}}`)); err != nil {
		t.Fatal(err)
	}
	if d.Tarpitted("eve") {
		t.Fatal("eve caught while the tarpit was off")
	}
}

// TestSettingsShared: a change on one node reaches the others at their next
// sync, keeps what it does not name, refuses bad input without storing it,
// and survives Redis losing it.
func TestSettingsShared(t *testing.T) {
	ds, _, r := nodes(t, 2, defaults())
	a, b := ds[0], ds[1]
	ctx := context.Background()
	got, err := a.Change(ctx, []byte(`{"trust": {"min_account_age_days": 7}, "limits": {"join_subnet": "600-M"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.Trust.MinAccountAgeDays != 7 || got.Trust.ExtraChallengeBits != 4 || got.Limits.JoinSubnet != "600-M" || got.Limits.PollSubnet != "300-S" {
		t.Fatalf("Change = %+v", got)
	}
	syncAll(t, b)
	if b.Settings() != got {
		t.Fatalf("the other node has %+v, want %+v", b.Settings(), got)
	}
	for _, body := range []string{
		`{"tarpit": {"offences": -1}}`, `{"trust": {"extra_challenge_bits": 13}}`, `{"limits": {"poll_subnet": "fast"}}`,
		`{"version": 9}`, `{"tarpitt": {}}`, `[1]`, `{"tarpit": {"hold_s": 0}}`,
		`{"tarpit": {"offences": 1}}`, `{"tarpit": {"accounts_per_address": 2}}`, `{"tarpit": {"hold_s": 604800}}`,
	} {
		if _, err := b.Change(ctx, []byte(body)); !errors.Is(err, defence.ErrInvalid) {
			t.Errorf("Change(%s) = %v, want ErrInvalid", body, err)
		}
	}
	next, err := b.Change(ctx, []byte(`{"tarpit": {"offences": 50}}`))
	if err != nil || next.Version != 2 || next.Trust.MinAccountAgeDays != 7 {
		t.Fatalf("second Change = %+v, %v", next, err)
	}
	syncAll(t, a)
	if a.Settings() != next {
		t.Fatalf("first node has %+v, want %+v", a.Settings(), next)
	}

	// Redis loses the settings: a node puts its copy back, and a node
	// started afterwards reads them.
	if err := r.Client.Del(ctx, defence.NewKeys(r.Prefix).Settings()).Err(); err != nil {
		t.Fatal(err)
	}
	syncAll(t, a)
	late := defence.New(r.Client, r.Prefix, defence.Options{Defaults: defaults()})
	syncAll(t, late)
	if late.Settings() != next {
		t.Fatalf("a node started after the loss has %+v, want %+v", late.Settings(), next)
	}

	// Redis fails over to a replica holding the first change only: a node
	// holding the newer writes it back, and a node that had taken the
	// older one takes it.
	older, _ := json.Marshal(got)
	if err := r.Client.Set(ctx, defence.NewKeys(r.Prefix).Settings(), older, 0).Err(); err != nil {
		t.Fatal(err)
	}
	stale := defence.New(r.Client, r.Prefix, defence.Options{Defaults: got})
	syncAll(t, a, stale)
	if stale.Settings() != next {
		t.Fatalf("after the failover a node has %+v, want %+v", stale.Settings(), next)
	}
	// Two changes on either side of a failover share a version: every node
	// takes the one Redis holds.
	split := next
	split.Tarpit.Offences = 77
	b2, _ := json.Marshal(split)
	if err := r.Client.Set(ctx, defence.NewKeys(r.Prefix).Settings(), b2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	syncAll(t, a, b)
	if a.Settings() != split || b.Settings() != split {
		t.Fatalf("nodes hold %+v and %+v, want Redis's %+v", a.Settings(), b.Settings(), split)
	}
}

func TestLowTrust(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	yes, no := true, false
	risk := func(f float64) *float64 { return &f }
	rules := defence.TrustRules{MinAccountAgeDays: 7, RequireVerifiedPhone: true, MaxRiskScore: 60, ExtraChallengeBits: 4}
	cases := []struct {
		name string
		sig  tokens.Signals
		want string
	}{
		{"no signals", tokens.Signals{}, ""},
		{"old, verified, low risk", tokens.Signals{AccountCreated: now.AddDate(-1, 0, 0), PhoneVerified: &yes, RiskScore: risk(10)}, ""},
		{"a day old", tokens.Signals{AccountCreated: now.AddDate(0, 0, -1)}, "account_age"},
		{"phone not verified", tokens.Signals{PhoneVerified: &no}, "phone"},
		{"risky", tokens.Signals{RiskScore: risk(61)}, "risk"},
		{"at the risk threshold", tokens.Signals{RiskScore: risk(60)}, ""},
	}
	for _, tc := range cases {
		if low, rule := rules.LowTrust(tc.sig, now); low != (tc.want != "") || rule != tc.want {
			t.Errorf("%s: LowTrust = %v, %q; want %q", tc.name, low, rule, tc.want)
		}
	}
	if low, _ := (defence.TrustRules{}).LowTrust(tokens.Signals{PhoneVerified: &no, RiskScore: risk(100)}, now); low {
		t.Error("rules without thresholds marked an account")
	}
}

func TestNetwork(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.77": "192.0.2.0/24", "::ffff:192.0.2.77": "192.0.2.0/24",
		"2001:db8:1:2:3::4": "2001:db8:1::/48",
	} {
		if got := defence.Network(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("Network(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestChallengeRamp(t *testing.T) {
	r := defence.ChallengeRamp{JoinsPerS: 1000, MaxExtraBits: 3}
	for rate, want := range map[float64]int{0: 0, 999: 0, 1000: 0, 1001: 1, 1999: 1, 2000: 2, 3999: 2, 4000: 3, 1e6: 3} {
		if got := r.ExtraBits(rate); got != want {
			t.Errorf("ExtraBits(%g) = %d, want %d", rate, got, want)
		}
	}
	if got := (defence.ChallengeRamp{MaxExtraBits: 3}).ExtraBits(1e6); got != 0 {
		t.Errorf("an unset ramp adds %d bits", got)
	}
}
