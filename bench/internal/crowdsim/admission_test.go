package crowdsim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAutotuneValidate(t *testing.T) {
	tests := []struct {
		name  string
		a     Autotune
		start float64
		bad   bool
	}{
		{"off, any rate", Autotune{}, 0, false},
		{"within its bounds", Autotune{MinRatePerS: 100, MaxRatePerS: 8000}, 500, false},
		{"at its floor", Autotune{MinRatePerS: 100, MaxRatePerS: 8000}, 100, false},
		{"a floor of 0", Autotune{MaxRatePerS: 8000}, 1, false},
		{"below its floor", Autotune{MinRatePerS: 100, MaxRatePerS: 8000}, 50, true},
		{"above its ceiling", Autotune{MinRatePerS: 100, MaxRatePerS: 8000}, 9000, true},
		{"unthrottled", Autotune{MaxRatePerS: 8000}, 0, true},
		{"min above max", Autotune{MinRatePerS: 900, MaxRatePerS: 800}, 850, true},
		{"a negative floor", Autotune{MinRatePerS: -1, MaxRatePerS: 800}, 100, true},
		{"a ceiling the edge refuses", Autotune{MinRatePerS: 1, MaxRatePerS: 2_000_000}, 100, true},
		{"only a floor", Autotune{MinRatePerS: 100}, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.a.Validate(tt.start); (err != nil) != tt.bad {
				t.Errorf("%+v.Validate(%g) = %v, want an error: %v", tt.a, tt.start, err, tt.bad)
			}
		})
	}
}

func TestReadRateSample(t *testing.T) {
	tests := []struct {
		name string
		body string
		want RateSample
		bad  bool
	}{
		{"autotuned", `{"rate_per_s":750.5,"paused":false,"challenge_bits":0,"now_serving":900,"queue_length":5000,"admitted_total":900,` +
			`"autotune":{"on":true,"min_rate_per_s":100,"max_rate_per_s":8000}}`,
			RateSample{T: 3.5, RatePerS: 750.5, AdmittedTotal: 900, Autotune: true}, false},
		{"fixed and paused, no autotune heard yet", `{"rate_per_s":2000,"paused":true,"admitted_total":12}`,
			RateSample{T: 3.5, RatePerS: 2000, Paused: true, AdmittedTotal: 12}, false},
		{"a rate of 0 is a reading", `{"rate_per_s":0}`, RateSample{T: 3.5}, false},
		{"no rate", `{"paused":true}`, RateSample{}, true},
		{"an error answer", `{"error":"please_wait"}`, RateSample{}, true},
		{"not JSON", `<html>`, RateSample{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readRateSample([]byte(tt.body), 3.5)
			if (err != nil) != tt.bad || got != tt.want {
				t.Errorf("readRateSample(%s) = %+v, %v; want %+v (error: %v)", tt.body, got, err, tt.want, tt.bad)
			}
		})
	}
}

// The origin answers newest first; the run keeps them oldest first, in
// seconds since the sale's start, and tells the controller's from others.
func TestReadRateChanges(t *testing.T) {
	zero := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	body := `{"changes":[
		{"id":3,"at":"2026-12-06T10:00:04.5Z","actor":"autotune: reserve p99 300ms over 250ms","settings_version":3,
			"before":{"rate_per_s":1000,"paused":false,"challenge_bits":0,"autotune":true},"after":{"rate_per_s":700,"paused":false,"challenge_bits":0,"autotune":true}},
		{"id":2,"at":"2026-12-06T10:00:02Z","actor":"autotune: healthy","settings_version":2,
			"before":{"rate_per_s":600,"autotune":true},"after":{"rate_per_s":1000,"autotune":true}},
		{"id":1,"at":"2026-12-06T09:59:50Z","actor":"admin token 0a1b2c3d from 127.0.0.1","settings_version":1,
			"before":{"rate_per_s":100,"autotune":false},"after":{"rate_per_s":600,"autotune":true}}]}`
	got, err := readRateChanges([]byte(body), zero)
	if err != nil {
		t.Fatalf("readRateChanges = %v", err)
	}
	want := []RateChange{
		{T: -10, Actor: "admin token 0a1b2c3d from 127.0.0.1", BeforeRatePerS: 100, AfterRatePerS: 600, Autotune: true},
		{T: 2, Actor: "autotune: healthy", BeforeRatePerS: 600, AfterRatePerS: 1000, Autotune: true},
		{T: 4.5, Actor: "autotune: reserve p99 300ms over 250ms", BeforeRatePerS: 1000, AfterRatePerS: 700, Autotune: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readRateChanges = %+v\nwant %+v", got, want)
	}
	for i, w := range []struct {
		controller bool
		why        string
	}{{false, ""}, {true, "healthy"}, {true, "reserve p99 300ms over 250ms"}} {
		if got[i].ByController() != w.controller || got[i].Why() != w.why {
			t.Errorf("change %d (%q): ByController %v, Why %q; want %v, %q", i, got[i].Actor, got[i].ByController(), got[i].Why(), w.controller, w.why)
		}
	}
	if got, err := readRateChanges([]byte(`{"changes":[]}`), zero); err != nil || len(got) != 0 {
		t.Errorf("readRateChanges(none) = %v, %v; want none", got, err)
	}
	if _, err := readRateChanges([]byte(`nope`), zero); err == nil {
		t.Error("readRateChanges(not JSON) = nil error")
	}
}

// The watch takes one sample a tick, never a sample of zeros for a read
// that failed (it counts those), and stops with its context.
func TestRateWatchSamplesEachTick(t *testing.T) {
	answers := []struct {
		status int
		body   string
		err    error
	}{
		{200, `{"rate_per_s":500,"admitted_total":0}`, nil},
		{503, `{"error":"please_wait"}`, nil},
		{0, "", errors.New("connection refused")},
		{200, `{"rate_per_s":850,"admitted_total":700,"autotune":{"on":true}}`, nil},
	}
	var reads int
	now := -2.0 // the first sample at -1 s: before the open
	w := &rateWatch{
		read: func(context.Context) (int, []byte, error) {
			a := answers[reads]
			reads++
			return a.status, []byte(a.body), a.err
		},
		since: func() time.Duration { now++; return time.Duration(now * float64(time.Second)) },
	}
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() { w.run(ctx, tick); close(done) }()
	for range answers {
		tick <- time.Time{}
	}
	cancel()
	<-done
	samples, failed := w.result()
	want := []RateSample{{T: -1, RatePerS: 500}, {T: 2, RatePerS: 850, AdmittedTotal: 700, Autotune: true}}
	if !reflect.DeepEqual(samples, want) || failed != 2 {
		t.Errorf("samples %+v, failed %d; want %+v, 2 failed", samples, failed, want)
	}
}

// At the end the run reads the changes through the edge's admin listener,
// with the admin token, and keeps the watch's samples; what it cannot read
// is a note.
func TestAdmissionReadsTheEdgesAdmin(t *testing.T) {
	zero := time.Now().Truncate(time.Second)
	var paths []string
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer admin-token" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		paths = append(paths, r.URL.Path)
		switch r.URL.Path {
		case "/admin/sales/s1/admission":
			_, _ = w.Write([]byte(`{"rate_per_s":1200,"admitted_total":40,"autotune":{"on":true}}`))
		case "/admin/sales/s1/changes":
			_, _ = w.Write([]byte(`{"changes":[{"at":"` + zero.Add(3*time.Second).UTC().Format(time.RFC3339Nano) +
				`","actor":"autotune: healthy","before":{"rate_per_s":800},"after":{"rate_per_s":1200,"autotune":true}}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer edge.Close()
	s := &sim{cfg: Config{EdgeAdminURL: edge.URL, AdminToken: "admin-token", Autotune: Autotune{MinRatePerS: 100, MaxRatePerS: 8000}},
		sale: "s1", zero: zero}
	w := s.newRateWatch()
	w.sample(context.Background())
	var res Result
	s.admission(context.Background(), &res, w)
	a := res.Admission
	if a == nil || len(a.Samples) != 1 || a.Samples[0].RatePerS != 1200 || a.Samples[0].AdmittedTotal != 40 || a.FailedReads != 0 ||
		a.Autotune != s.cfg.Autotune {
		t.Fatalf("admission = %+v, want the one sample at 1,200/s and the run's bounds", a)
	}
	if len(a.Changes) != 1 || a.Changes[0].T != 3 || !a.Changes[0].ByController() || a.Changes[0].AfterRatePerS != 1200 {
		t.Errorf("changes = %+v, want the controller's step to 1,200/s at 3 s", a.Changes)
	}
	if want := []string{"/admin/sales/s1/admission", "/admin/sales/s1/changes"}; !reflect.DeepEqual(paths, want) || len(res.Notes) != 0 {
		t.Errorf("asked %q with notes %q; want %q and no note", paths, res.Notes, want)
	}

	s.sale = "unknown"
	res = Result{}
	s.admission(context.Background(), &res, s.newRateWatch())
	if res.Admission == nil || len(res.Admission.Changes) != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "404") {
		t.Errorf("changes of an unknown sale: %+v, notes %q; want none and a note with the 404", res.Admission, res.Notes)
	}
}
