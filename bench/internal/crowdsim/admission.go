package crowdsim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Autotune is the origin's admission controller (origin/internal/autotune)
// as a run switches it on for its sale: the rate starts at the scenario's
// RatePerS and the controller steps it within [MinRatePerS, MaxRatePerS]
// every FLASHGATE_AUTOTUNE_PERIOD of the stack. The zero value leaves it
// off: the rate stays as the run set it.
type Autotune struct {
	MinRatePerS float64 `json:"min_rate_per_s"`
	MaxRatePerS float64 `json:"max_rate_per_s"`
}

// On reports whether the run switches the controller on.
func (a Autotune) On() bool { return a != Autotune{} }

// maxRatePerS is the highest admission rate the edge takes.
const maxRatePerS = 1_000_000

// ValidBounds refuses bounds the edge would: it takes 0 ≤ min ≤ max ≤
// 1,000,000 with max > 0. Autotune off has none to refuse.
func (a Autotune) ValidBounds() error {
	if a.On() && (a.MinRatePerS < 0 || a.MaxRatePerS <= 0 || a.MinRatePerS > a.MaxRatePerS || a.MaxRatePerS > maxRatePerS) {
		return fmt.Errorf("crowd: autotune bounds %g–%g/s: want 0 ≤ min ≤ max ≤ 1,000,000 and max > 0", a.MinRatePerS, a.MaxRatePerS)
	}
	return nil
}

// Validate refuses bounds the edge would (ValidBounds) and a starting rate
// outside them (0, unthrottled, among them).
func (a Autotune) Validate(start float64) error {
	if err := a.ValidBounds(); err != nil || !a.On() {
		return err
	}
	if start < a.MinRatePerS || start > a.MaxRatePerS || start <= 0 {
		return fmt.Errorf("crowd: autotune starts at the rate %g/s: want one within its bounds %g–%g/s", start, a.MinRatePerS, a.MaxRatePerS)
	}
	return nil
}

// controllerActor starts the actor of every change the admission
// controller records (origin/internal/autotune: "autotune: <why>").
const controllerActor = "autotune: "

// Admission is a run's admission rate over time: the edge's setting read
// once a second while the crowd ran, and the changes the origin recorded
// for the sale.
type Admission struct {
	// Autotune is the controller as the run switched it on; zero: the
	// rate was fixed.
	Autotune Autotune `json:"autotune"`
	// Samples are GET /admin/sales/{id}/admission on the edge, once a
	// second from the set-up until the crowd stopped, oldest first; a
	// second whose read failed has none (FailedReads).
	Samples     []RateSample `json:"samples,omitempty"`
	FailedReads int          `json:"failed_reads"`
	// Changes are the sale's admission changes as the origin recorded
	// them (GET /admin/sales/{id}/changes, the last 100), oldest first:
	// the run's own set-up, then the controller's steps.
	Changes []RateChange `json:"changes,omitempty"`
}

// RateSample is one reading of the edge's admission setting.
type RateSample struct {
	T        float64 `json:"t"` // seconds since the sale's start, when it was asked for
	RatePerS float64 `json:"rate_per_s"`
	Paused   bool    `json:"paused"`
	// AdmittedTotal is how many places the cursor had admitted: its rise
	// between two samples is who was let through, whatever the setting
	// (the edge holds ticks while the checkout is behind, and ramps).
	AdmittedTotal int64 `json:"admitted_total"`
	Autotune      bool  `json:"autotune"` // the controller on, as the edge last heard
}

// RateChange is one recorded change of the sale's admission settings.
type RateChange struct {
	T float64 `json:"t"` // seconds since the sale's start (the origin's clock, this machine's)
	// Actor is who made it: the controller's start with "autotune: "
	// and give its reason, an operator's name the admin token.
	Actor          string  `json:"actor"`
	BeforeRatePerS float64 `json:"before_rate_per_s"`
	AfterRatePerS  float64 `json:"after_rate_per_s"`
	Autotune       bool    `json:"autotune"` // the controller on after it
}

// ByController reports whether the admission controller made the change.
func (c RateChange) ByController() bool { return strings.HasPrefix(c.Actor, controllerActor) }

// Why is the controller's reason for the change ("healthy", "reserve p99
// 300ms over 250ms"), or "" for a change it did not make.
func (c RateChange) Why() string {
	why, ok := strings.CutPrefix(c.Actor, controllerActor)
	if !ok {
		return ""
	}
	return why
}

// admissionAnswer is GET /admin/sales/{id}/admission's answer, as far as
// a sample reads it.
type admissionAnswer struct {
	RatePerS      *float64 `json:"rate_per_s"`
	Paused        bool     `json:"paused"`
	AdmittedTotal int64    `json:"admitted_total"`
	Autotune      *struct {
		On bool `json:"on"`
	} `json:"autotune"`
}

// readRateSample reads an admission answer into the sample taken at t.
func readRateSample(body []byte, t float64) (RateSample, error) {
	var a admissionAnswer
	if !jsonInto(body, &a) || a.RatePerS == nil {
		return RateSample{}, errors.New("crowd: an admission answer without rate_per_s")
	}
	return RateSample{T: t, RatePerS: *a.RatePerS, Paused: a.Paused, AdmittedTotal: a.AdmittedTotal,
		Autotune: a.Autotune != nil && a.Autotune.On}, nil
}

// changesAnswer is GET /admin/sales/{id}/changes's answer, newest first.
type changesAnswer struct {
	Changes []struct {
		At     time.Time `json:"at"`
		Actor  string    `json:"actor"`
		Before struct {
			RatePerS float64 `json:"rate_per_s"`
		} `json:"before"`
		After struct {
			RatePerS float64 `json:"rate_per_s"`
			Autotune bool    `json:"autotune"`
		} `json:"after"`
	} `json:"changes"`
}

// readRateChanges reads a changes answer into changes oldest first, their
// times in seconds since zero.
func readRateChanges(body []byte, zero time.Time) ([]RateChange, error) {
	var a changesAnswer
	if !jsonInto(body, &a) {
		return nil, errors.New("crowd: a changes answer that is not JSON")
	}
	out := make([]RateChange, 0, len(a.Changes))
	for _, c := range slices.Backward(a.Changes) {
		out = append(out, RateChange{T: c.At.Sub(zero).Seconds(), Actor: c.Actor,
			BeforeRatePerS: c.Before.RatePerS, AfterRatePerS: c.After.RatePerS, Autotune: c.After.Autotune})
	}
	return out, nil
}

// rateWatch samples a sale's admission setting on the edge.
type rateWatch struct {
	read  func(ctx context.Context) (status int, body []byte, err error) // one GET of the admission
	since func() time.Duration                                           // time since the sale's start

	mu      sync.Mutex // guards samples and failed
	samples []RateSample
	failed  int
}

// rateReadBudget bounds one admission read: a sample late by more is a
// second's sample no longer.
const rateReadBudget = 2 * time.Second

// run takes a sample at each tick until ctx ends.
func (w *rateWatch) run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		w.sample(ctx)
	}
}

// sample takes one sample; a read that fails or does not parse counts
// as failed (never a sample of zeros).
func (w *rateWatch) sample(ctx context.Context) {
	t := w.since().Seconds()
	rctx, cancel := context.WithTimeout(ctx, rateReadBudget)
	defer cancel()
	status, body, err := w.read(rctx)
	smp, perr := readRateSample(body, t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || status != http.StatusOK || perr != nil {
		if ctx.Err() == nil { // a read cut short by the crowd's end is no failure
			w.failed++
		}
		return
	}
	w.samples = append(w.samples, smp)
}

// result is what the watch sampled, oldest first.
func (w *rateWatch) result() ([]RateSample, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.samples), w.failed
}

// newRateWatch watches the run's sale through the edge's admin listener.
func (s *sim) newRateWatch() *rateWatch {
	url := s.cfg.EdgeAdminURL + "/admin/sales/" + s.sale + "/admission"
	return &rateWatch{
		read:  func(ctx context.Context) (int, []byte, error) { return s.admin(ctx, http.MethodGet, url, nil) },
		since: s.since,
	}
}

// admission fills res.Admission: the watch's samples and the changes the
// origin recorded, read through the edge once the crowd has stopped.
func (s *sim) admission(ctx context.Context, res *Result, w *rateWatch) {
	a := &Admission{Autotune: s.cfg.Autotune}
	a.Samples, a.FailedReads = w.result()
	res.Admission = a
	if a.FailedReads > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("The admission rate could not be read %d times of once a second (GET /admin/sales/%s/admission); "+
			"the rate over time has gaps there.", a.FailedReads, s.sale))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, body, err := s.admin(ctx, http.MethodGet, s.cfg.EdgeAdminURL+"/admin/sales/"+s.sale+"/changes", nil)
	if err == nil && status == http.StatusOK {
		a.Changes, err = readRateChanges(body, s.zero)
	} else if err == nil {
		err = fmt.Errorf("%d %s", status, strings.TrimSpace(string(body)))
	}
	if err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("The sale's admission changes could not be read (GET /admin/sales/%s/changes): %v.", s.sale, err))
	}
}
