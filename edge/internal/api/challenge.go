package api

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The headers a join carries its proof of work in, when the sale asks for
// one (docs/API.md).
const (
	headerChallenge = "X-Challenge"
	headerSolution  = "X-Challenge-Solution"
)

// codeChallengeRequired: the join needs a solved proof-of-work challenge.
const codeChallengeRequired = "challenge_required"

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
// (package challenge). A solution refused for any reason but its age
// counts against the account towards the tarpit.
func (s *Server) challenged(ctx *fasthttp.RequestCtx, v *admission.View, account, userToken string) (bool, error) {
	bits := max(v.State.ChallengeBits, 0)
	if s.Defences != nil {
		if bits > 0 && s.Line != nil {
			bits += s.Defences.Settings().Ramp.ExtraBits(s.Line.JoinRate(v.Sale.SaleID))
		}
		if s.Defences.Settings().Trust.Active() {
			// Only now are the token's claims read again for its signals.
			if _, signals, err := s.Users.Shopper(userToken); err == nil {
				if low, extra := s.Defences.LowTrust(signals); low {
					bits += extra
				}
			}
		}
		bits = min(bits, challenge.MaxDifficultyBits)
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
