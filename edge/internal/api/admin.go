package api

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/challenge"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
)

type admissionJSON struct {
	RatePerSecond float64 `json:"rate_per_s"`
	Paused        bool    `json:"paused"`
	ChallengeBits int     `json:"challenge_bits"`
	NowServing    int64   `json:"now_serving"`
	QueueLength   int64   `json:"queue_length"`
	AdmittedTotal int64   `json:"admitted_total"`
	// Autotune is the origin's admission controller as this node last
	// heard of it; absent before it has.
	Autotune *autotuneJSON `json:"autotune,omitempty"`
}

type autotuneJSON struct {
	On  bool    `json:"on"`
	Min float64 `json:"min_rate_per_s"`
	Max float64 `json:"max_rate_per_s"`
}

// autotuneOf is the sale's autotune setting as this node last heard the
// origin's copy of its line, or nil.
func (s *Server) autotuneOf(sale string) *autotuneJSON {
	row, ok := s.Line.Durable(sale)
	if !ok {
		return nil
	}
	return &autotuneJSON{On: row.Autotune, Min: row.AutotuneMin, Max: row.AutotuneMax}
}

func admissionOf(st line.State) admissionJSON {
	return admissionJSON{
		RatePerSecond: st.RatePerSecond, Paused: st.Paused, ChallengeBits: st.ChallengeBits, NowServing: st.NowServing,
		QueueLength: st.QueueLength, AdmittedTotal: min(st.NowServing, st.QueueLength),
	}
}

// getAdmission: GET /admin/sales/{sale}/admission.
func (s *Server) getAdmission(ctx *fasthttp.RequestCtx, params []string) error {
	v, err := s.Admission.View(params[0])
	if err != nil {
		return err
	}
	if !v.Fresh(s.Clock.Now()) {
		return admission.ErrCursorStale
	}
	a := admissionOf(v.State)
	a.Autotune = s.autotuneOf(params[0])
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, a)
	return nil
}

// putAdmission: PUT /admin/sales/{sale}/admission {rate_per_s?, paused?,
// challenge_bits?}.
// The settings are written to the origin's durable copy of the line first
// (a pause is a promise: it must outlive Redis); from then on they are the
// settings. When the origin cannot be reached nothing changes and the
// answer is 503. Then they go into Redis, where every edge node obeys them
// from its next tick: 200. When Redis does not take them now, the answer
// is 202 — recorded, not in effect yet — and every node puts them into
// Redis on its next tick that reaches it.
func (s *Server) putAdmission(ctx *fasthttp.RequestCtx, params []string) error {
	if _, err := s.Admission.View(params[0]); err != nil {
		return err
	}
	var settings struct {
		RatePerSecond *float64 `json:"rate_per_s"`
		Paused        *bool    `json:"paused"`
		ChallengeBits *int     `json:"challenge_bits"`
		Autotune      *bool    `json:"autotune"`
		AutotuneMin   *float64 `json:"autotune_min_rate_per_s"`
		AutotuneMax   *float64 `json:"autotune_max_rate_per_s"`
	}
	dec := json.NewDecoder(bytes.NewReader(ctx.PostBody()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&settings); err != nil {
		return errAdmissionBody
	}
	body := line.Change{RatePerSecond: settings.RatePerSecond, Paused: settings.Paused, ChallengeBits: settings.ChallengeBits,
		Autotune: settings.Autotune, AutotuneMin: settings.AutotuneMin, AutotuneMax: settings.AutotuneMax}
	if !validAutotune(body) {
		return errAutotune
	}
	if body.RatePerSecond != nil && (*body.RatePerSecond < 0 || *body.RatePerSecond > 1e6) {
		return errRate
	}
	if body.ChallengeBits != nil && (*body.ChallengeBits < 0 || *body.ChallengeBits > challenge.MaxDifficultyBits) {
		return errChallengeBits
	}
	c, cancel := s.budget()
	defer cancel()
	if body == (line.Change{}) {
		return s.getAdmission(ctx, params) // nothing to change
	}
	body.Actor = s.actorOf(ctx)
	st, applied, err := s.Line.Settings(c, params[0], body)
	if err != nil {
		return err
	}
	s.Log.Info("admission changed", "sale", params[0], "rate_per_s", st.RatePerSecond, "paused", st.Paused,
		"challenge_bits", st.ChallengeBits, "in_redis", applied, "actor", body.Actor)
	status := fasthttp.StatusOK
	if !applied {
		status = fasthttp.StatusAccepted
	}
	a := admissionOf(st)
	a.Autotune = s.autotuneOf(params[0])
	httpapi.WriteJSON(ctx, status, a)
	return nil
}

// validAutotune: the bounds come together (0 <= min <= max <= 1,000,000,
// max > 0), and with autotune when it is switched on, as the origin takes
// them.
func validAutotune(c line.Change) bool {
	if (c.AutotuneMin == nil) != (c.AutotuneMax == nil) {
		return false
	}
	if c.AutotuneMin == nil {
		return c.Autotune == nil || !*c.Autotune
	}
	lo, hi := *c.AutotuneMin, *c.AutotuneMax
	return lo >= 0 && lo <= hi && hi > 0 && hi <= 1e6
}
