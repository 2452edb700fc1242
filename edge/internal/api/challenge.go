package api

import (
	"errors"
	"time"

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
// it as low trust), or the join carries a solution, at the difficulty in
// force for it (Difficulty), of the sale's published challenge or of one
// issued to this account for this sale, recent enough.
// Otherwise it has answered 403 challenge_required with a fresh challenge
// of this account's own and returns true. The check costs about a
// microsecond and no Redis (package challenge). A solution refused for any
// reason but its age or a difficulty raised meanwhile counts against the
// account towards the tarpit.
func (s *Server) challenged(ctx *fasthttp.RequestCtx, v *admission.View, account string, signals tokens.Signals) (bool, error) {
	bits := s.difficulty(v.Sale.SaleID, v.State.ChallengeBits, &signals)
	if bits == 0 || s.Challenges == nil {
		return false, nil
	}
	now := s.Clock.Now()
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

// difficulty is the proof of work a join of sale needs now: saleBits, the
// sale's setting, raised by the defences (Defences.Difficulty) for sig's
// account, or for every account when sig is nil.
func (s *Server) difficulty(sale string, saleBits int, sig *tokens.Signals) int {
	if s.Defences == nil {
		return max(saleBits, 0)
	}
	var joinRate func() float64
	if s.Line != nil {
		joinRate = func() float64 { return s.Line.JoinRate(sale) }
	}
	return s.Defences.Difficulty(saleBits, joinRate, sig)
}

// PublishChallenge is the challenge the snapshot of sale publishes at now
// (admission.Options.Challenge): the sale's published proof of work at the
// difficulty every account needs, so a page solves it before it joins and
// joins once. ok is false when joins need no proof of work.
func (s *Server) PublishChallenge(sale string, saleBits int, now time.Time) (admission.Challenge, bool) {
	bits := s.difficulty(sale, saleBits, nil)
	if bits == 0 || s.Challenges == nil {
		return admission.Challenge{}, false
	}
	ch, err := s.Challenges.Publish(sale, bits, now)
	if err != nil { // an invalid sale id or clock: nothing a page could solve
		return admission.Challenge{}, false
	}
	return admission.Challenge{Value: ch.Value, DifficultyBits: ch.DifficultyBits}, true
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
