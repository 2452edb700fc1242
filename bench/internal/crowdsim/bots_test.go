package crowdsim

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// network is an IPv4 address's /24.
func network(t *testing.T, ip string) netip.Prefix {
	t.Helper()
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		t.Fatalf("%q is not an IPv4 address", ip)
	}
	p, _ := a.Prefix(24)
	return p
}

// The crowd's bot cohorts are who their tactics say: the hammering
// accounts on 4 addresses of one /24 at the open, the smart ones each on
// an address and a /24 of its own at the pre-queue's start, 50 accounts to
// a payment instrument, each handing its admission token to the next; the
// honest shoppers each with an instrument of their own; nobody's address
// in another group's networks.
func TestBotCohorts(t *testing.T) {
	sc := DefaultScenario()
	sc.Shoppers, sc.Hammering.Accounts, sc.Smart = 5_000, 200, SmartCohort(1_000)
	s := &sim{cfg: Config{Scenario: sc, Seed: 7}}
	crowd := s.crowd()
	if len(crowd) != 6_200 || len(s.cohorts) != 2 {
		t.Fatalf("crowd() = %d shoppers in %d cohorts, want 6200 in 2", len(crowd), len(s.cohorts))
	}
	by := map[string][]*shopper{}
	for _, sh := range crowd {
		name := honestCohort
		if sh.cohort != nil {
			name = sh.cohort.Name
			if !sh.bot {
				t.Errorf("%s is in the %s cohort but not a bot", sh.account, name)
			}
		}
		by[name] = append(by[name], sh)
	}
	networks := map[string]map[netip.Prefix]int{}
	addresses := map[string]map[string]int{}
	instruments := map[string]map[string]int{}
	for name, shoppers := range by {
		networks[name], addresses[name], instruments[name] = map[netip.Prefix]int{}, map[string]int{}, map[string]int{}
		for _, sh := range shoppers {
			networks[name][network(t, sh.ip)]++
			addresses[name][sh.ip]++
			instruments[name][sh.instrument]++
		}
	}
	for _, tt := range []struct {
		cohort                                string
		accounts, addresses, nets, instrument int
		from, to                              time.Duration
	}{
		{"hammering", 200, 4, 1, 200, 0, botArrivalSpread},
		{"smart", 1_000, 1_000, 1_000, 20, -20 * time.Second, -20*time.Second + botArrivalSpread},
	} {
		shoppers := by[tt.cohort]
		if len(shoppers) != tt.accounts || len(addresses[tt.cohort]) != tt.addresses || len(networks[tt.cohort]) != tt.nets ||
			len(instruments[tt.cohort]) != tt.instrument {
			t.Errorf("%s: %d accounts on %d addresses in %d /24s paying with %d instruments; want %d, %d, %d, %d",
				tt.cohort, len(shoppers), len(addresses[tt.cohort]), len(networks[tt.cohort]), len(instruments[tt.cohort]),
				tt.accounts, tt.addresses, tt.nets, tt.instrument)
		}
		for _, sh := range shoppers {
			if sh.arrival < tt.from || sh.arrival >= tt.to {
				t.Errorf("%s arrives at %v, want in [%v, %v)", sh.account, sh.arrival, tt.from, tt.to)
			}
			if !sh.payer || !sh.stays {
				t.Errorf("%s does not pay or does not stay", sh.account)
			}
		}
	}
	for instrument, n := range instruments["smart"] {
		if n != 50 {
			t.Errorf("smart instrument %s pays for %d accounts, want 50", instrument, n)
		}
	}
	if len(instruments[honestCohort]) != sc.Shoppers {
		t.Errorf("%d honest shoppers pay with %d instruments, want one each", sc.Shoppers, len(instruments[honestCohort]))
	}
	for a, nets := range networks {
		for b, other := range networks {
			for n := range nets {
				if a != b && other[n] > 0 {
					t.Errorf("/24 %v holds both %s and %s accounts", n, a, b)
				}
			}
		}
	}
	// Partners: round the smart cohort, each account handing on to the next.
	smart := map[string]*shopper{}
	for _, sh := range by["smart"] {
		smart[sh.account] = sh
	}
	for _, sh := range by["smart"] {
		if sh.partner == nil || sh.partner == sh || sh.partner.cohort != sh.cohort {
			t.Fatalf("%s hands its token to %v, want another smart account", sh.account, sh.partner)
		}
	}
	if p := smart["smart-00999"].partner; p.account != "smart-00000" {
		t.Errorf("smart-00999 hands on to %s, want smart-00000", p.account)
	}
	for _, sh := range by["hammering"] {
		if sh.partner != nil {
			t.Errorf("hammering %s hands on its token; its cohort shares none", sh.account)
		}
	}
	// The honest crowd is the one it was before there were smart bots.
	sc.Smart.Accounts = 0
	before := (&sim{cfg: Config{Scenario: sc, Seed: 7}}).crowd()
	honest := map[string]*shopper{}
	for _, sh := range before {
		honest[sh.account] = sh
	}
	for _, sh := range by[honestCohort] {
		if b := honest[sh.account]; b == nil || b.arrival != sh.arrival || b.ip != sh.ip {
			t.Fatalf("honest %s differs with a smart cohort beside it", sh.account)
		}
	}
}

// An address each gives every account its own /24 up to ownNetworks
// accounts; shared addresses go round robin.
func TestBotAddress(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	own := &cohortRun{BotCohort: BotCohort{Name: "x", Accounts: ownNetworks}, index: 1}
	nets := map[netip.Prefix]bool{}
	for j := range ownNetworks {
		ip := botAddress(own, j, rng)
		n := network(t, ip)
		if nets[n] {
			t.Fatalf("account %d's /24 %v is another's", j, n)
		}
		nets[n] = true
		if a := netip.MustParseAddr(ip); !netip.MustParsePrefix("100.96.0.0/11").Contains(a) {
			t.Fatalf("account %d of the second cohort at %s, outside its half of 100.64.0.0/10", j, ip)
		}
	}
	shared := &cohortRun{BotCohort: BotCohort{Addresses: 3}}
	var got []string
	for j := range 4 {
		got = append(got, botAddress(shared, j, rng))
	}
	if want := []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("shared addresses = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		per  int
		j    int
		want string
	}{{0, 7, "upi:x-00007@okicici"}, {1, 7, "upi:x-00007@okicici"}, {50, 49, "upi:x-00000@okicici"}, {50, 50, "upi:x-00001@okicici"}} {
		c := &cohortRun{BotCohort: BotCohort{Name: "x", AccountsPerInstrument: tt.per}}
		if got := botInstrument(c, tt.j); got != tt.want {
			t.Errorf("botInstrument(%d per instrument, account %d) = %q, want %q", tt.per, tt.j, got, tt.want)
		}
	}
}

// The fairness table's rows: each cohort by arrival class, holds, paid
// units and their spread over instruments, the proofs of work solved, the
// 403 challenge_required answers and the tarpit.
func TestGroups(t *testing.T) {
	smart := &cohortRun{BotCohort: BotCohort{Name: "smart"}}
	smart.shared.tried.Store(3)
	smart.shared.refused.Store(2)
	smart.shared.other.Store(1)
	hammering := &cohortRun{BotCohort: BotCohort{Name: "hammering"}}
	sh := func(c *cohortRun, arrival time.Duration, f fate, paid bool, instrument string) *shopper {
		return &shopper{cohort: c, bot: c != nil, arrival: arrival, fate: f, paid: paid, instrument: instrument, launched: true}
	}
	crowd := []*shopper{
		sh(nil, -time.Second, fateReserved, true, "upi:a"),
		sh(nil, -time.Second, fateSoldOut, false, "upi:b"),
		sh(nil, -time.Second, fateSoldOut, false, "upi:c"),
		sh(nil, -time.Second, fateReserved, false, "upi:d"), // held, walked away
		sh(nil, time.Second, fateSoldOut, false, "upi:e"),
		sh(nil, 0, fateReserved, true, "upi:f"), // at the open is later
		sh(smart, -time.Second, fateReserved, true, "upi:s0"),
		sh(smart, -time.Second, fateReserved, true, "upi:s0"),
		sh(smart, -time.Second, fateReserved, true, "upi:s0"),
		sh(smart, -time.Second, fateReserved, true, "upi:s1"),
		sh(smart, -time.Second, fateSoldOut, false, "upi:s1"),
		sh(hammering, time.Second, fateGaveUp, false, "upi:h"),
		{arrival: time.Second, fate: fateReserved, paid: true, instrument: "upi:never"}, // not set going
	}
	crowd[1].solved, crowd[4].tarpitted, crowd[11].tarpitted, crowd[11].solved = true, true, true, true
	crowd[0].solved, crowd[5].solved, crowd[6].solved = true, true, true // the published challenge: solved, never a 403
	crowd[11].challengeRequired, crowd[2].challengeRequired = true, true // crowd[2]: a 403 it could not solve
	got := groups(crowd, []*cohortRun{hammering, smart})
	want := []Group{
		{Cohort: "honest", PreQueue: true, Accounts: 4, Held: 2, Paid: 1, Instruments: 1, MaxPaidPerInstrument: 1, MeanPaidPerInstrument: 1,
			Challenged: 2, ChallengeRequired: 1},
		{Cohort: "honest", Accounts: 2, Held: 1, Paid: 1, Instruments: 1, MaxPaidPerInstrument: 1, MeanPaidPerInstrument: 1, Challenged: 1, Tarpitted: 1},
		{Cohort: "hammering", Bot: true, Accounts: 1, Challenged: 1, ChallengeRequired: 1, Tarpitted: 1},
		{Cohort: "smart", Bot: true, PreQueue: true, Accounts: 5, Held: 4, Paid: 4, Instruments: 2, MaxPaidPerInstrument: 3, MeanPaidPerInstrument: 2,
			Challenged: 1, SharedTokens: &SharedTokens{Tried: 3, Refused: 2, Other: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups =\n%+v\nwant\n%+v", got, want)
	}
	if r := got[3].WinRate(); r != 0.8 {
		t.Errorf("smart win rate = %v, want 0.8", r)
	}
	if r := (Group{}).WinRate(); r != 0 {
		t.Errorf("empty group's win rate = %v, want 0", r)
	}
}

// An entry covers its account only, not others sharing its address.
func TestMarkTarpitted(t *testing.T) {
	crowd := []*shopper{
		{account: "a", ip: "10.0.0.1"}, {account: "b", ip: "10.0.0.2"}, {account: "c", ip: "10.0.0.2"}, {account: "d", ip: "10.0.0.3"},
	}
	markTarpitted(crowd, []tarpitEntry{{Account: "a"}, {Account: "c"}, {Account: "nobody"}})
	var got []bool
	for _, sh := range crowd {
		got = append(got, sh.tarpitted)
	}
	if want := []bool{true, false, true, false}; !reflect.DeepEqual(got, want) {
		t.Errorf("tarpitted = %v, want %v", got, want)
	}
}

// Tactics: a hammering bot polls and retries at its own pace; a polite one
// as told; a bot that reserves at once has no reaction, a person 0.5 to 1.5
// times ReactionS.
func TestTactics(t *testing.T) {
	s := &sim{cfg: Config{Scenario: Scenario{ReactionS: 2}}}
	rng := rand.New(rand.NewPCG(1, 2))
	hammering := &shopper{bot: true, cohort: &cohortRun{BotCohort: HammeringCohort(1)}, rng: rng}
	polite := &shopper{bot: true, cohort: &cohortRun{BotCohort: SmartCohort(1)}, rng: rng}
	person := &shopper{rng: rng}
	told := reply{retryAfter: 3 * time.Second}
	if d := s.pollWait(hammering, 10*time.Second); d != 250*time.Millisecond {
		t.Errorf("hammering pollWait(told 10 s) = %v, want 250ms", d)
	}
	if d := s.retryWait(hammering, told); d != 250*time.Millisecond {
		t.Errorf("hammering retryWait(Retry-After 3) = %v, want 250ms", d)
	}
	if d := s.pollWait(polite, 10*time.Second); d < 10*time.Second || d > 11*time.Second {
		t.Errorf("polite pollWait(told 10 s) = %v, want 10–11 s", d)
	}
	if d := s.retryWait(polite, told); d < 3*time.Second || d > 3500*time.Millisecond {
		t.Errorf("polite retryWait(Retry-After 3) = %v, want 3–3.5 s", d)
	}
	if d := s.reaction(polite); d != 0 {
		t.Errorf("reaction of a bot that reserves at once = %v, want 0", d)
	}
	slow := &shopper{bot: true, cohort: &cohortRun{BotCohort: BotCohort{Name: "slow", Accounts: 1}}, rng: rng}
	for _, sh := range []*shopper{person, slow} {
		for range 100 {
			if d := s.reaction(sh); d < time.Second || d > 3*time.Second {
				t.Fatalf("reaction = %v, want 1–3 s (ReactionS 2)", d)
			}
		}
	}
	if !hammering.hammers() || polite.hammers() || person.hammers() {
		t.Error("hammers(): want the hammering bot only")
	}
}

// The defences' settings: unset leaves the stack alone; off and on say so,
// with the difficulty; bad modes and difficulties are refused.
func TestDefences(t *testing.T) {
	d := Defences{}.withDefaults()
	if d.ChallengeBits != 4 || d.DeviceBits != 17 || d.PhoneHashesPerS != 150_000 || d.ServerHashesPerS != 3_000_000 {
		t.Errorf("withDefaults = %+v", d)
	}
	if d.challengeBits() != nil {
		t.Error("unset defences put a challenge difficulty")
	}
	d.Mode = DefencesOff
	if b := d.challengeBits(); b == nil || *b != 0 {
		t.Errorf("defences off put %v, want 0", b)
	}
	d.Mode = DefencesOn
	if b := d.challengeBits(); b == nil || *b != 4 {
		t.Errorf("defences on put %v, want 4", b)
	}
	for _, bad := range []Defences{{Mode: "maybe"}, {ChallengeBits: 33}, {DeviceBits: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
	notes := defenceNotes(Bots{Defences: Defences{Mode: DefencesOn, Tarpit: "not available: 404 not found", OneUnitPerPayer: "on"}.withDefaults(),
		TarpitEntries: -1})
	joined := strings.Join(notes, "\n")
	for _, want := range []string{"real solution at 4 bits", "mean 2^17", "150000 hashes/s on a mid-range phone (874ms on average",
		"3000000 hashes/s on a server core", "(44ms on average)", "the tarpit was not available: 404 not found", "could not be read"} {
		if !strings.Contains(joined, want) {
			t.Errorf("defenceNotes lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "one unit per payer was") {
		t.Errorf("defenceNotes call an available defence unavailable:\n%s", joined)
	}
}
