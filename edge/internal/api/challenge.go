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

// challenged is false when the join may go on: the sale asks for no proof
// of work (ops set none), or the join carries a solution of a challenge
// issued to this account for this sale, recent, at the difficulty in
// force. Otherwise it has answered 403 challenge_required with a fresh
// challenge and returns true. The check costs about half a microsecond
// and no Redis (package challenge).
func (s *Server) challenged(ctx *fasthttp.RequestCtx, v *admission.View, account string) (bool, error) {
	bits := v.State.ChallengeBits
	if bits <= 0 || s.Challenges == nil {
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
		s.metrics.challenge(refusal(err)).Inc()
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
