// Package defence holds the edge's defences against scalpers that ops tune
// at run time (PUT /admin/defences): the tarpit, where accounts and
// addresses caught misbehaving wait in a line that never moves; the trust
// rules that ask accounts the shop knows little about for a harder proof of
// work; and the per-network limits. Every edge node shares the settings and
// the tarpit through Redis (keys.go) and keeps a copy in memory, so that a
// status poll asks no Redis whether its shopper is tarpitted.
package defence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ulule/limiter/v3"

	"github.com/flashgate/flashgate/tokens"
)

// Settings are the defences every edge node applies. The zero value of a
// rule's threshold switches that rule off.
type Settings struct {
	// Version orders changes: each admin change raises it by one, and a
	// node takes the settings with the highest version it has seen.
	Version int64         `json:"version"`
	Tarpit  TarpitRules   `json:"tarpit"`
	Trust   TrustRules    `json:"trust"`
	Limits  NetworkLimits `json:"limits"`
	Ramp    ChallengeRamp `json:"challenge_ramp"`
}

// ChallengeRamp raises a sale's proof of work while joins come fast: one
// bit (twice the work) more for each doubling of the join rate above
// JoinsPerS, at most MaxExtraBits. It raises the difficulty ops set for
// the sale, and asks nothing of a sale that asks no proof of work.
type ChallengeRamp struct {
	JoinsPerS    float64 `json:"joins_per_s"` // 0: off
	MaxExtraBits int     `json:"max_extra_bits"`
}

// ExtraBits is how much harder the proof of work is at a join rate of
// joinsPerS: one bit above JoinsPerS, one more at each doubling of it.
func (r ChallengeRamp) ExtraBits(joinsPerS float64) int {
	if r.JoinsPerS <= 0 || joinsPerS <= r.JoinsPerS {
		return 0
	}
	return min(int(math.Log2(joinsPerS/r.JoinsPerS))+1, r.MaxExtraBits)
}

// TarpitRules say who is tarpitted: accounts that keep earning refusals
// (failed proofs of work, joins and polls over the account's limits), and
// the accounts of an address or a network too many join one sale from.
type TarpitRules struct {
	Enabled bool `json:"enabled"`
	// Offences are the refusals an account may earn within OffenceWindow
	// on one node before it is tarpitted; 0: none tarpits.
	Offences int `json:"offences"`
	// AccountsPerAddress is how many accounts may join one sale from one
	// client address (an IPv6 client by its /64) within OffenceWindow on
	// one node; the next one tarpits them all. 0: no limit.
	AccountsPerAddress int `json:"accounts_per_address"`
	// AccountsPerNetwork is the same for a client's network (an IPv4 /24,
	// an IPv6 /48). 0: no limit.
	AccountsPerNetwork int `json:"accounts_per_network"`
	// HoldS is how long an entry stays in the tarpit, in seconds, unless
	// ops release it first.
	HoldS int `json:"hold_s"`
}

// TrustRules say which accounts the shop's signals (optional claims of its
// user token, docs/API.md) mark as low trust; such accounts solve a proof
// of work ExtraChallengeBits harder than the sale asks of others. A signal
// the token does not carry never marks an account; a zero threshold is not
// checked.
type TrustRules struct {
	MinAccountAgeDays    float64 `json:"min_account_age_days"`
	RequireVerifiedPhone bool    `json:"require_verified_phone"`
	// MaxRiskScore: a risk_score above it is low trust (0 to 100).
	MaxRiskScore       float64 `json:"max_risk_score"`
	ExtraChallengeBits int     `json:"extra_challenge_bits"`
}

// NetworkLimits are the per-network rate limits of joins and status polls
// in ulule/limiter's format ("1200-M"), per node; "" switches one off.
type NetworkLimits struct {
	JoinSubnet string `json:"join_subnet"`
	PollSubnet string `json:"poll_subnet"`
}

// OffenceWindow is how long a node remembers an account's offences and the
// accounts seen on an address.
const OffenceWindow = 10 * time.Minute

// Bounds of the settings.
const (
	MaxExtraChallengeBits = 12
	MaxHoldS              = 24 * 3600
	MinOffences           = 3
	MinAccountsPerPlace   = 4
)

// DefaultSettings are the defences before ops change any: the tarpit on,
// no trust rules (the shop's claims are unknown until ops name
// thresholds), and the network limits the node was configured with.
func DefaultSettings(joinSubnet, pollSubnet string) Settings {
	return Settings{
		Tarpit: TarpitRules{Enabled: true, Offences: 30, AccountsPerAddress: 32, AccountsPerNetwork: 0, HoldS: 3600},
		Trust:  TrustRules{ExtraChallengeBits: 4},
		Ramp:   ChallengeRamp{MaxExtraBits: 3},
		Limits: NetworkLimits{JoinSubnet: joinSubnet, PollSubnet: pollSubnet},
	}
}

// ErrInvalid wraps every reason settings are refused.
var ErrInvalid = errors.New("invalid defence settings")

// Validate checks every field's range.
func (s Settings) Validate() error {
	t, tr := s.Tarpit, s.Trust
	switch {
	case t.Offences != 0 && t.Offences < MinOffences:
		return fmt.Errorf("%w: tarpit.offences must be 0 (off) or at least %d: one refusal can be an accident", ErrInvalid, MinOffences)
	case t.AccountsPerAddress != 0 && t.AccountsPerAddress < MinAccountsPerPlace,
		t.AccountsPerNetwork != 0 && t.AccountsPerNetwork < MinAccountsPerPlace:
		return fmt.Errorf("%w: tarpit.accounts_per_address and accounts_per_network must be 0 (off) or at least %d: households share addresses", ErrInvalid, MinAccountsPerPlace)
	case t.HoldS < 1 || t.HoldS > MaxHoldS:
		return fmt.Errorf("%w: tarpit.hold_s must be 1 to %d", ErrInvalid, MaxHoldS)
	case tr.MinAccountAgeDays < 0 || tr.MaxRiskScore < 0 || tr.MaxRiskScore > 100:
		return fmt.Errorf("%w: trust.min_account_age_days must be 0 or more, trust.max_risk_score 0 to 100", ErrInvalid)
	case tr.ExtraChallengeBits < 0 || tr.ExtraChallengeBits > MaxExtraChallengeBits:
		return fmt.Errorf("%w: trust.extra_challenge_bits must be 0 to %d", ErrInvalid, MaxExtraChallengeBits)
	case s.Ramp.JoinsPerS < 0 || s.Ramp.MaxExtraBits < 0 || s.Ramp.MaxExtraBits > MaxExtraChallengeBits:
		return fmt.Errorf("%w: challenge_ramp.joins_per_s must be 0 (off) or more, challenge_ramp.max_extra_bits 0 to %d", ErrInvalid, MaxExtraChallengeBits)
	}
	for name, f := range map[string]string{"limits.join_subnet": s.Limits.JoinSubnet, "limits.poll_subnet": s.Limits.PollSubnet} {
		if _, err := ParseRate(f); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
	}
	return nil
}

// ParseRate parses a network limit: nil for "" (no limit).
func ParseRate(formatted string) (*limiter.Rate, error) {
	if formatted == "" {
		return nil, nil
	}
	r, err := limiter.NewRateFromFormatted(formatted)
	if err != nil || r.Limit <= 0 {
		return nil, fmt.Errorf("%q is not a rate such as 1200-M", formatted)
	}
	return &r, nil
}

// Merge returns s changed by the JSON object body: the fields it names
// replace s's, the rest stay; unknown fields and a version are refused.
func (s Settings) Merge(body []byte) (Settings, error) {
	var probe struct {
		Version *int64 `json:"version"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return s, fmt.Errorf("%w: the body must be a JSON object of settings", ErrInvalid)
	}
	if probe.Version != nil {
		return s, fmt.Errorf("%w: version is not set by hand", ErrInvalid)
	}
	next := s
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&next); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := next.Validate(); err != nil {
		return s, err
	}
	return next, nil
}

// Active reports whether any threshold is set and would ask more of an
// account: only then are a join's signals read.
func (r TrustRules) Active() bool {
	return r.ExtraChallengeBits > 0 && (r.MinAccountAgeDays > 0 || r.RequireVerifiedPhone || r.MaxRiskScore > 0)
}

// LowTrust reports whether the rules mark an account with signals sig as
// low trust at now, and by which rule ("" when not).
func (r TrustRules) LowTrust(sig tokens.Signals, now time.Time) (bool, string) {
	switch {
	case r.MinAccountAgeDays > 0 && !sig.AccountCreated.IsZero() &&
		now.Sub(sig.AccountCreated) < time.Duration(r.MinAccountAgeDays*float64(24*time.Hour)):
		return true, "account_age"
	case r.RequireVerifiedPhone && sig.PhoneVerified != nil && !*sig.PhoneVerified:
		return true, "phone"
	case r.MaxRiskScore > 0 && sig.RiskScore != nil && *sig.RiskScore > r.MaxRiskScore:
		return true, "risk"
	}
	return false, ""
}
