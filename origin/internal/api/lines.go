package api

import (
	"cmp"
	"context"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/ledger"
	"github.com/flashgate/flashgate/tokens"
)

// The line routes keep the durable copy of each sale's waiting line for the
// edge nodes, which restore it when their Redis loses it. Only edges call
// them: every request is signed with the token key set the edge and origin
// share, for this origin's audience (tokens.RequestSignatureHeader), and a
// signature is taken once by all the origins sharing the ledger, restarts
// included (SignatureStore); anything else is 401.

// SignatureStore records the signatures of the line requests taken, where
// every origin sees them and a restart forgets none: ledger.Store.
type SignatureStore interface {
	// TakeSignature records key, which its verifier takes until until, and
	// reports whether it is fresh (false: taken before, a replay).
	TakeSignature(ctx context.Context, key string, until time.Time) (fresh bool, err error)
}

var _ SignatureStore = (*ledger.Store)(nil)

// lineJSON is a line as the routes answer it.
type lineJSON struct {
	SaleID          string    `json:"sale_id"`
	Seed            string    `json:"seed"`
	RatePerSecond   float64   `json:"rate_per_s"`
	Paused          bool      `json:"paused"`
	ChallengeBits   int       `json:"challenge_bits"`
	SettingsVersion int64     `json:"settings_version"`
	PreCeiling      int64     `json:"pre_ceiling"`
	PostCeiling     int64     `json:"post_ceiling"`
	ServingCeiling  int64     `json:"serving_ceiling"`
	ServingRaised   int64     `json:"serving_raised"`
	DrawSize        *int64    `json:"draw_size"` // null until the start's pre-queue is sealed
	Autotune        bool      `json:"autotune"`
	AutotuneMin     float64   `json:"autotune_min_rate_per_s"`
	AutotuneMax     float64   `json:"autotune_max_rate_per_s"`
	UpdatedAt       time.Time `json:"updated_at"`
}

func lineOf(l ledger.Line) lineJSON {
	out := lineJSON{SaleID: l.SaleID, Seed: l.Seed, RatePerSecond: l.RatePerSecond, Paused: l.Paused, ChallengeBits: l.ChallengeBits,
		SettingsVersion: l.SettingsVersion, PreCeiling: l.PreCeiling, PostCeiling: l.PostCeiling,
		ServingCeiling: l.ServingCeiling, ServingRaised: l.ServingRaised, UpdatedAt: l.UpdatedAt,
		Autotune: l.Autotune, AutotuneMin: l.AutotuneMin, AutotuneMax: l.AutotuneMax}
	if l.Drawn {
		out.DrawSize = &l.DrawSize
	}
	return out
}

// maxCeiling bounds a ceiling or a pre-queue size: far above any line, far
// below where float64 JSON numbers lose integers.
const maxCeiling = 1_000_000_000_000_000

// signed lets only requests signed by an edge through, each signature
// once. A signature the store cannot record is not taken: the answer is
// please_wait, and the edge signs its next try anew. A route with a sale
// in its path has it checked here; one without (the admin changes') has
// no params.
func (s *Server) signed(h handler) handler {
	return func(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
		if s.Edges == nil {
			return httpapi.ErrNotFound
		}
		sig, err := s.Edges.Verify(string(ctx.Request.Header.Peek(tokens.RequestSignatureHeader)),
			string(ctx.Method()), string(ctx.Path()), ctx.PostBody())
		if err != nil {
			return err
		}
		fresh, err := s.Signatures.TakeSignature(c, sig.Key, sig.Until)
		if err != nil {
			return fmt.Errorf("line request: %w", err)
		}
		if !fresh {
			return fmt.Errorf("line request: %w", tokens.ErrReplayed)
		}
		if len(params) > 0 && !httpapi.ValidID(params[0]) {
			return errUnknownLine
		}
		return h(ctx, c, params)
	}
}

// answerLine writes a line, or returns the store's error.
func answerLine(ctx *fasthttp.RequestCtx, l ledger.Line, err error) error {
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, lineOf(l))
	return nil
}

// getLine: GET /v1/lines/{sale}.
func (s *Server) getLine(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	l, err := s.Ledger.Line(c, params[0])
	return answerLine(ctx, l, err)
}

// ensureLine: POST /v1/lines/{sale} {seed, rate_per_s, paused?}: creates the
// line unless it exists and answers it as stored (the first seed wins).
func (s *Server) ensureLine(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	var body struct {
		Seed          string   `json:"seed"`
		RatePerSecond *float64 `json:"rate_per_s"`
		Paused        bool     `json:"paused"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if !validSeed(body.Seed) {
		return errInvalidSeed
	}
	if body.RatePerSecond == nil || !validRate(*body.RatePerSecond) {
		return errInvalidRate
	}
	l, err := s.Ledger.EnsureLine(c, params[0], body.Seed, *body.RatePerSecond, body.Paused)
	return answerLine(ctx, l, err)
}

// lineSettings: PUT /v1/lines/{sale}/settings {rate_per_s?, paused?,
// challenge_bits?}. Changes take effect in the order they reach the
// origin; each bumps the settings version, which orders them in the edges'
// Redis too. (The signer's clock orders nothing: an edge whose clock ran
// ahead would otherwise block every later change until real time caught
// up.)
func (s *Server) lineSettings(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	var body struct {
		RatePerSecond *float64 `json:"rate_per_s"`
		Paused        *bool    `json:"paused"`
		ChallengeBits *int     `json:"challenge_bits"`
		Autotune      *bool    `json:"autotune"`
		AutotuneMin   *float64 `json:"autotune_min_rate_per_s"`
		AutotuneMax   *float64 `json:"autotune_max_rate_per_s"`
		Actor         string   `json:"actor"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if body.RatePerSecond == nil && body.Paused == nil && body.ChallengeBits == nil && body.Autotune == nil && body.AutotuneMin == nil {
		return errNoSettings
	}
	// The bounds come together, and with autotune switched on; a rate set
	// by hand switches it off.
	if (body.AutotuneMin == nil) != (body.AutotuneMax == nil) || (body.Autotune != nil && *body.Autotune && body.AutotuneMin == nil) ||
		(body.AutotuneMin != nil && !(validRate(*body.AutotuneMin) && validRate(*body.AutotuneMax) &&
			*body.AutotuneMin <= *body.AutotuneMax && *body.AutotuneMax > 0)) {
		return errInvalidAutotune
	}
	if body.RatePerSecond != nil && body.Autotune == nil {
		off := false
		body.Autotune = &off
	}
	if !validActor(body.Actor) {
		return errInvalidActor
	}
	if body.RatePerSecond != nil && !validRate(*body.RatePerSecond) {
		return errInvalidRate
	}
	if body.ChallengeBits != nil && (*body.ChallengeBits < 0 || *body.ChallengeBits > maxChallengeBits) {
		return errInvalidChallengeBits
	}
	l, err := s.Ledger.SetLineSettings(c, params[0], ledger.SettingsChange{
		RatePerSecond: body.RatePerSecond, Paused: body.Paused, ChallengeBits: body.ChallengeBits,
		Autotune: body.Autotune, AutotuneMin: body.AutotuneMin, AutotuneMax: body.AutotuneMax,
		Actor: cmp.Or(body.Actor, "unnamed"),
	})
	return answerLine(ctx, l, err)
}

// maxActor bounds who a settings change names.
const maxActor = 200

// validActor: "" (an edge that names no one) or up to maxActor bytes of
// printable UTF-8.
func validActor(a string) bool {
	if len(a) > maxActor || !utf8.ValidString(a) {
		return false
	}
	for _, r := range a {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// admissionChangeJSON is one admission change as the changes route
// answers it.
type admissionChangeJSON struct {
	ID              int64                 `json:"id"`
	At              time.Time             `json:"at"`
	Actor           string                `json:"actor"`
	SettingsVersion int64                 `json:"settings_version"`
	Before          admissionSettingsJSON `json:"before"`
	After           admissionSettingsJSON `json:"after"`
}

type admissionSettingsJSON struct {
	RatePerSecond float64 `json:"rate_per_s"`
	Paused        bool    `json:"paused"`
	ChallengeBits int     `json:"challenge_bits"`
	Autotune      bool    `json:"autotune"`
}

// maxChanges bounds the changes one read answers.
const maxChanges = 100

// lineChanges: GET /v1/lines/{sale}/changes: the sale's last admission
// changes, newest first, for the ops dashboard on the edges.
func (s *Server) lineChanges(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	if !httpapi.ValidID(params[0]) {
		return errUnknownSale
	}
	changes, err := s.Ledger.AdmissionChanges(c, params[0], maxChanges)
	if err != nil {
		return err
	}
	out := struct {
		Changes []admissionChangeJSON `json:"changes"`
	}{Changes: make([]admissionChangeJSON, 0, len(changes))}
	for _, ch := range changes {
		out.Changes = append(out.Changes, admissionChangeJSON{
			ID: ch.ID, At: ch.At, Actor: ch.Actor, SettingsVersion: ch.SettingsVersion,
			Before: admissionSettingsJSON(ch.Before), After: admissionSettingsJSON(ch.After),
		})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// lineBooks: GET /v1/lines/{sale}/books: the sale's books, as the origin's
// admin ledger route answers them, for the ops dashboard on the edges
// (which hold no origin admin token).
func (s *Server) lineBooks(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	return s.ledger(ctx, c, params)
}

// maxChallengeBits bounds a join's proof of work: 2^32 hashes on average
// is already hours on a phone.
const maxChallengeBits = 32

// raiseLine: POST /v1/lines/{sale}/ceilings {pre?, post?, serving?,
// settings_version?}: raises each join ceiling given to at least that
// value, and the serving ceiling only while the line's settings version is
// settings_version (required with serving): a ceiling sized for settings
// since replaced is not taken. None is ever lowered here.
func (s *Server) raiseLine(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	var body struct {
		Pre     *int64 `json:"pre"`
		Post    *int64 `json:"post"`
		Serving *int64 `json:"serving"`
		Version *int64 `json:"settings_version"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if body.Pre == nil && body.Post == nil && body.Serving == nil {
		return errNoCeilings
	}
	var v [3]int64
	for i, p := range []*int64{body.Pre, body.Post, body.Serving} {
		if p == nil {
			continue
		}
		if *p < 0 || *p > maxCeiling {
			return errInvalidCeiling
		}
		v[i] = *p
	}
	var version int64
	if body.Serving != nil {
		if body.Version == nil || *body.Version < 0 {
			return errInvalidVersion
		}
		version = *body.Version
	}
	l, err := s.Ledger.RaiseLine(c, params[0], v[0], v[1], v[2], version)
	return answerLine(ctx, l, err)
}

// lowerServing: POST /v1/lines/{sale}/serving {settings_version, ceiling}:
// an edge reports the serving ceiling Redis held at that settings version
// (after applying it brought the ceiling down); while the version is in
// force the origin lowers its copy to it, never below a serving raise it
// took at that version.
func (s *Server) lowerServing(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	var body struct {
		Version *int64 `json:"settings_version"`
		Ceiling *int64 `json:"ceiling"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if body.Version == nil || *body.Version < 0 {
		return errInvalidVersion
	}
	if body.Ceiling == nil || *body.Ceiling < 0 || *body.Ceiling > maxCeiling {
		return errInvalidCeiling
	}
	l, err := s.Ledger.LowerServing(c, params[0], *body.Version, *body.Ceiling)
	return answerLine(ctx, l, err)
}

// sealDraw: POST /v1/lines/{sale}/draw {pre_queue}: records the pre-queue's
// size at the start unless one is recorded; answers the line as stored.
func (s *Server) sealDraw(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	var body struct {
		PreQueue *int64 `json:"pre_queue"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if body.PreQueue == nil || *body.PreQueue < 0 || *body.PreQueue > maxCeiling {
		return errInvalidPreQueue
	}
	l, err := s.Ledger.SealDraw(c, params[0], *body.PreQueue)
	return answerLine(ctx, l, err)
}

func validRate(r float64) bool { return r >= 0 && r <= 1e6 }

func validSeed(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}
