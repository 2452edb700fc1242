package crowdsim

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defence modes a run can ask for (Defences.Mode).
const (
	DefencesOff = "off"
	DefencesOn  = "on"
)

// Defences are the stack's defences against bots that a run switches, and
// how the crowd's devices are modelled solving a proof of work.
//
// The edge checks real solutions at ChallengeBits, small enough that the
// simulator's one core solves every join of a 100,000-shopper crowd; on top
// of that, each solver waits as long as its device would take at
// DeviceBits (production's difficulty): a geometric number of hashes with
// mean 2^DeviceBits, at a phone's or a server core's hash rate.
type Defences struct {
	// Mode is DefencesOn (a proof of work on every join, the edge's
	// tarpit, one paid unit per payment instrument), DefencesOff (none of
	// them), or "" to leave the stack's settings as they are (the edge's
	// tarpit setting, a sale's defaults).
	Mode string `json:"mode"`
	// ChallengeBits is the difficulty the edge asks of joins when on; 0
	// means 4.
	ChallengeBits int `json:"challenge_bits"`
	// DeviceBits is the difficulty devices' solving time is modelled at; 0
	// means 17 (edge/internal/challenge's DefaultDifficultyBits).
	DeviceBits int `json:"device_bits"`
	// PhoneHashesPerS is a mid-range phone's page's hash rate; 0 means
	// 150,000 (static/challenge-worker.js in headless Chromium does 165–
	// 187k here, docs/FAIRNESS.md).
	PhoneHashesPerS float64 `json:"phone_hashes_per_s"`
	// ServerHashesPerS is one server core's hash rate; 0 means 3,000,000.
	ServerHashesPerS float64 `json:"server_hashes_per_s"`

	// What the stack made of them (set by the run): "on", "off", or "not
	// available: why"; "" when the run did not set it.
	Tarpit          string `json:"tarpit,omitempty"`
	OneUnitPerPayer string `json:"one_unit_per_payer,omitempty"`
}

// withDefaults fills the zero model fields.
func (d Defences) withDefaults() Defences {
	if d.ChallengeBits <= 0 {
		d.ChallengeBits = 4
	}
	if d.DeviceBits <= 0 {
		d.DeviceBits = 17
	}
	if d.PhoneHashesPerS <= 0 {
		d.PhoneHashesPerS = 150_000
	}
	if d.ServerHashesPerS <= 0 {
		d.ServerHashesPerS = 3_000_000
	}
	return d
}

// Validate reports a mode that is neither off, on nor unset, and a
// difficulty the edge would refuse.
func (d Defences) Validate() error {
	switch {
	case d.Mode != "" && d.Mode != DefencesOff && d.Mode != DefencesOn:
		return fmt.Errorf("crowd: defences %q: want %q or %q", d.Mode, DefencesOff, DefencesOn)
	case d.ChallengeBits < 0 || d.ChallengeBits > maxChallengeBits:
		return fmt.Errorf("crowd: challenge bits %d: want 1 to %d", d.ChallengeBits, maxChallengeBits)
	case d.DeviceBits < 0 || d.DeviceBits > maxChallengeBits:
		return fmt.Errorf("crowd: device bits %d: want 1 to %d", d.DeviceBits, maxChallengeBits)
	}
	return nil
}

// on reports whether the run switches the defences on.
func (d Defences) on() bool { return d.Mode == DefencesOn }

// challengeBits is the admission setting the run puts: the difficulty
// when on, 0 when off, nil when it leaves the sale's (none) alone.
func (d Defences) challengeBits() *int {
	switch d.Mode {
	case DefencesOn:
		return &d.ChallengeBits
	case DefencesOff:
		return new(int)
	}
	return nil
}

// onOff names a switch as the report does.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// notAvailable is a setting the stack did not take: its status and the
// start of its answer.
func notAvailable(status int, body []byte, err error) string {
	if err != nil {
		return "not available: " + err.Error()
	}
	b := strings.TrimSpace(string(body))
	if len(b) > 120 {
		b = b[:120] + "…"
	}
	return fmt.Sprintf("not available: %d %s", status, b)
}

// setTarpit switches the edge's tarpit (PUT /admin/defences on its admin
// listener) as the mode asks, and records what came of it: a stack without
// the route (404) or that refuses it runs on, the tarpit "not available".
func (s *sim) setTarpit(ctx context.Context) {
	d := &s.cfg.Defences
	if d.Mode == "" {
		return
	}
	body := map[string]any{"tarpit": map[string]any{"enabled": d.on()}}
	status, answer, err := s.admin(ctx, "PUT", s.cfg.EdgeAdminURL+"/admin/defences", body)
	if err != nil || status/100 != 2 {
		d.Tarpit = notAvailable(status, answer, err)
		return
	}
	d.Tarpit = onOff(d.on())
}

// tarpitEntry is one entry of the edge's GET /admin/tarpit: an account the
// edge answers "waiting" however long it polls.
type tarpitEntry struct {
	Account string `json:"account"`
	Reason  string `json:"reason"`
	Since   string `json:"since"` // RFC 3339
}

// readTarpit lists the edge's tarpit entries made since the run began (an
// entry whose time cannot be read counts); ok is false when the list could
// not be read (no such route yet, or a bad answer).
func (s *sim) readTarpit(ctx context.Context, since time.Time) (entries []tarpitEntry, ok bool) {
	status, body, err := s.admin(ctx, "GET", s.cfg.EdgeAdminURL+"/admin/tarpit", nil)
	var list struct {
		Entries []tarpitEntry `json:"entries"`
	}
	if err != nil || status != 200 || !jsonInto(body, &list) {
		return nil, false
	}
	for _, e := range list.Entries {
		if t, err := time.Parse(time.RFC3339, e.Since); err == nil && t.Before(since.Add(-time.Second)) {
			continue // an earlier run's
		}
		entries = append(entries, e)
	}
	return entries, true
}

// markTarpitted marks every shopper whose account an entry names.
func markTarpitted(shoppers []*shopper, entries []tarpitEntry) {
	held := map[string]bool{}
	for _, e := range entries {
		held[e.Account] = true
	}
	for _, sh := range shoppers {
		sh.tarpitted = held[sh.account]
	}
}

// defenceNotes say how the run's proof of work was modelled and which
// defences the stack did not have.
func defenceNotes(b Bots) []string {
	d := b.Defences
	var notes []string
	if d.on() {
		mean := func(rate float64) string {
			return (time.Duration(math.Ldexp(1, d.DeviceBits) / rate * float64(time.Second))).Round(time.Millisecond).String()
		}
		notes = append(notes, fmt.Sprintf("Proof of work: the edge asked every join for a real solution at %d bits, which the simulator "+
			"found on its own core — of the challenge the sale snapshot publishes, solved for the shopper's account before its one "+
			"join (a scalper's script reads the snapshot as the page does), or, when the edge answered a join 403 challenge_required "+
			"(no challenge published, or its solution refused), of the personal one that answer carried, before joining again; "+
			"each solver then waited as its device would have at %d bits: a geometric "+
			"number of hashes with mean 2^%d, at %s hashes/s on a mid-range phone (%s on average; 1 in 20 takes three times that) "+
			"and at %s hashes/s on a server core for the bot cohorts with server CPUs (%s on average).",
			d.ChallengeBits, d.DeviceBits, d.DeviceBits, strconv.FormatFloat(d.PhoneHashesPerS, 'f', -1, 64), mean(d.PhoneHashesPerS),
			strconv.FormatFloat(d.ServerHashesPerS, 'f', -1, 64), mean(d.ServerHashesPerS)))
	}
	for _, c := range []struct{ name, state string }{{"tarpit", d.Tarpit}, {"one unit per payer", d.OneUnitPerPayer}} {
		if strings.HasPrefix(c.state, "not available") {
			notes = append(notes, fmt.Sprintf("Defences %s: the %s was %s.", d.Mode, c.name, c.state))
		}
	}
	if d.Mode != "" && b.TarpitEntries < 0 {
		notes = append(notes, "The edge's tarpit list (GET /admin/tarpit) could not be read at the end: nobody is counted as tarpitted.")
	}
	return notes
}
