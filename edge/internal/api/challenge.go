package api

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/tokens"
)

// The headers a join carries its proof of work in, when the sale asks for
// one (docs/API.md).
const (
	headerChallenge = "X-Challenge"
	headerSolution  = "X-Challenge-Solution"
)

// codeChallengeRequired: the join needs a solved proof-of-work challenge.
const codeChallengeRequired = "challenge_required"

// maxExtendedBits bounds the difficulty the challenge ramp and the trust
// rules raise a sale's to: 2^22 hashes take a mid-range phone about 25 s on
// average, and 1 in 20 about 75 s, within the challenge's two minutes.
const maxExtendedBits = 22

// challengeRequired is the 403 a join gets without a valid solution: the
// contract's error shape with the challenge to solve.
type challengeRequired struct {
	Error          string `json:"error"`
	Message        string `json:"message"`
	RequestID      string `json:"request_id"`
	Challenge      string `json:"challenge"`
	DifficultyBits int    `json:"difficulty_bits"`
}

// challenged is false when the join may go on: no proof of work is asked
// of this account (the sale asks none, and the shop's signals do not mark
// it as low trust), or the join carries a solution of a challenge issued
// to this account for this sale, recent, at the difficulty in force: the
// sale's, raised while joins come fast (the challenge ramp), plus the trust
// rules' extra bits for a low-trust account.
// Otherwise it has answered 403 challenge_required with a fresh challenge
// and returns true. The check costs about half a microsecond and no Redis
// (package challenge). A solution refused for any reason but its age or a
// difficulty raised meanwhile counts against the account towards the tarpit.
func (s *Server) challenged(ctx *fasthttp.RequestCtx, v *admission.View, account string, signals tokens.Signals) (bool, error) {
	bits := max(v.State.ChallengeBits, 0)
	if s.Defences != nil {
		st := s.Defences.Settings()
		extra := 0
		if bits > 0 && st.Ramp.JoinsPerS > 0 && s.Line != nil {
			extra += st.Ramp.ExtraBits(s.Line.JoinRate(v.Sale.SaleID))
		}
		if low, more := s.Defences.LowTrust(signals); low {
			extra += more
		}
		// The extras never ask more than a phone can solve within the
		// challenge's window; ops may set a sale harder still.
		bits = max(bits, min(bits+extra, maxExtendedBits))
	}
	if bits == 0 || s.Challenges == nil {
		return false, nil
	}
	now := s.Clock()
	given := string(ctx.Request.Header.Peek(headerChallenge))
	if given != "" {
		err := s.Challenges.Verify(account, v.Sale.SaleID, given, string(ctx.Request.Header.Peek(headerSolution)), bits, now)
		if err == nil {
			s.metrics.challenge("solved").Inc()
			return false, nil
		}
		why := refusal(err)
		s.metrics.challenge(why).Inc()
		if why != "expired" && why != "too_easy" && s.Defences != nil { // an honest page meets those when ops raise the difficulty
			s.Defences.Offence(account, "challenge_"+why)
		}
	}
	ch, err := s.Challenges.Issue(account, v.Sale.SaleID, bits, now)
	if err != nil {
		return true, err
	}
	s.metrics.challenge("issued").Inc()
	s.metrics.rejected(codeChallengeRequired).Inc()
	id := httpapi.RequestID(ctx)
	ctx.Response.Header.SetCanonical(httpapi.HeaderRequestID, []byte(id))
	httpapi.WriteJSON(ctx, fasthttp.StatusForbidden, challengeRequired{
		Error: codeChallengeRequired, Message: "This sale asks for a proof of work before a place in line: solve the challenge and join again with it.",
		RequestID: id, Challenge: ch.Value, DifficultyBits: ch.DifficultyBits,
	})
	return true, nil
}

// refusal names why a solution was refused, for the metrics.
func refusal(err error) string {
	switch {
	case errors.Is(err, challenge.ErrExpired):
		return "expired"
	case errors.Is(err, challenge.ErrTooEasy):
		return "too_easy"
	case errors.Is(err, challenge.ErrUnsolved):
		return "unsolved"
	case errors.Is(err, challenge.ErrWrongAccountOrSale):
		return "wrong_account_or_sale"
	default:
		return "malformed"
	}
}
