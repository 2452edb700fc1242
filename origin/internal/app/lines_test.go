package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// lineReply is the line routes' answer.
type lineReply struct {
	SaleID          string  `json:"sale_id"`
	Seed            string  `json:"seed"`
	RatePerSecond   float64 `json:"rate_per_s"`
	Paused          bool    `json:"paused"`
	ChallengeBits   int     `json:"challenge_bits"`
	SettingsVersion int64   `json:"settings_version"`
	PreCeiling      int64   `json:"pre_ceiling"`
	PostCeiling     int64   `json:"post_ceiling"`
	ServingCeiling  int64   `json:"serving_ceiling"`
	ServingRaised   int64   `json:"serving_raised"`
	DrawSize        *int64  `json:"draw_size"`
	Error           string  `json:"error"`
}

// publicHost is the audience origintest's origins take line requests for.
const publicHost = tokenstest.LineAudience

// lineCall sends a line request signed by signer (nil: unsigned).
func lineCall(t *testing.T, o *origintest.Origin, signer *tokens.RequestSigner, method, path, body string) (int, lineReply) {
	t.Helper()
	r := origintest.Request{Method: method, Path: path, Header: map[string]string{}}
	if body != "" {
		r.Body = []byte(body)
	}
	if signer != nil {
		r.Header[tokens.RequestSignatureHeader] = signer.Sign(method, path, r.Body)
	}
	status, b := o.Do(t, r)
	var l lineReply
	if err := json.Unmarshal(b, &l); err != nil {
		t.Errorf("%s %s answered %q, not JSON: %v", method, path, b, err)
	}
	return status, l
}

const seedA, seedB = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// TestLineRoutes: the durable line an edge keeps through the origin. The
// first seed proposed wins for every caller, also when ten edges race;
// ceilings only ever rise, also under racing raises; settings keep what a
// change does not name and count versions, in the order changes arrive
// whatever the signers' clocks say; a request sent again is refused; and
// the draw size is set once.
func TestLineRoutes(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	sale := "line-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	path := "/v1/lines/" + sale

	if s, l := lineCall(t, o, sign, "GET", path, ""); s != 404 || l.Error != "unknown_sale" {
		t.Errorf("GET line before it exists = %d %+v, want 404 unknown_sale", s, l)
	}
	if s, l := lineCall(t, o, sign, "POST", "/v1/lines/no-such-sale", `{"seed":"`+seedA+`","rate_per_s":5}`); s != 404 || l.Error != "unknown_sale" {
		t.Errorf("POST line of a sale that does not exist = %d %+v, want 404 unknown_sale", s, l)
	}

	// Ten edges propose ten seeds at once: one wins, all read it.
	seeds := make([]string, 10)
	var wg sync.WaitGroup
	for i := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seed := strings.Repeat(fmt.Sprintf("%x", i), 64)
			s, l := lineCall(t, o, sign, "POST", path, `{"seed":"`+seed+`","rate_per_s":`+fmt.Sprint(i)+`}`)
			if s != 200 {
				t.Errorf("POST line with seed %d = %d %+v, want 200", i, s, l)
			}
			seeds[i] = l.Seed
		}()
	}
	wg.Wait()
	for i, s := range seeds {
		if s != seeds[0] || len(s) != 64 {
			t.Fatalf("racing POST line %d read seed %q, another %q: want one seed for every caller", i, s, seeds[0])
		}
	}
	if s, l := lineCall(t, o, sign, "POST", path, `{"seed":"`+seedB+`","rate_per_s":7,"paused":true}`); s != 200 || l.Seed != seeds[0] || l.Paused {
		t.Errorf("POST line again with another seed = %d %+v, want 200 with the stored seed %s, not paused", s, l, seeds[0])
	}

	// Ceilings rise, never fall; a field left out stays. The serving
	// ceiling rises only at the settings version it was sized for.
	steps := []struct {
		body               string
		pre, post, serving int64
	}{
		{`{"post":100}`, 0, 100, 0},
		{`{"post":50}`, 0, 100, 0},
		{`{"pre":10,"serving":5,"settings_version":0}`, 10, 100, 5},
		{`{"pre":3,"post":101,"serving":4,"settings_version":0}`, 10, 101, 5},
		{`{"serving":9,"settings_version":1}`, 10, 101, 5},
	}
	for _, st := range steps {
		s, l := lineCall(t, o, sign, "POST", path+"/ceilings", st.body)
		if s != 200 || l.PreCeiling != st.pre || l.PostCeiling != st.post || l.ServingCeiling != st.serving || l.ServingRaised != st.serving {
			t.Errorf("raise %s = %d %+v, want ceilings pre %d post %d serving %d (raised %[6]d)", st.body, s, l, st.pre, st.post, st.serving)
		}
	}
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, l := lineCall(t, o, sign, "POST", path+"/ceilings", fmt.Sprintf(`{"post":%d}`, 1000+i*10)); s != 200 {
				t.Errorf("racing raise %d = %d %+v, want 200", i, s, l)
			}
		}()
	}
	wg.Wait()
	if s, l := lineCall(t, o, sign, "GET", path, ""); s != 200 || l.PostCeiling != 1190 {
		t.Errorf("post ceiling after 20 racing raises up to 1190 = %d %+v, want 1190", s, l)
	}

	// Settings: each change names what it changes and bumps the version,
	// and no serving raise is taken at the new version yet.
	s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"paused":true}`)
	if s != 200 || !l.Paused || l.SettingsVersion != 1 || l.ServingCeiling != 5 || l.ServingRaised != 0 {
		t.Errorf("PUT settings paused = %d %+v, want paused at version 1, serving ceiling 5 and none raised", s, l)
	}
	// The serving ceiling follows reports of what Redis holds at the
	// version in force down, never below a raise taken at it, never up,
	// and a report of another version changes nothing.
	for _, st := range []struct {
		body    string
		serving int64
	}{
		{`{"settings_version":0,"ceiling":1}`, 5},
		{`{"settings_version":1,"ceiling":7}`, 5},
		{`{"settings_version":1,"ceiling":2}`, 2},
		{`{"settings_version":1,"ceiling":0}`, 0},
	} {
		if s, l := lineCall(t, o, sign, "POST", path+"/serving", st.body); s != 200 || l.ServingCeiling != st.serving {
			t.Errorf("report %s = %d %+v, want serving ceiling %d", st.body, s, l, st.serving)
		}
	}
	if s, l := lineCall(t, o, sign, "POST", path+"/ceilings", `{"serving":3,"settings_version":1}`); s != 200 || l.ServingCeiling != 3 || l.ServingRaised != 3 {
		t.Errorf("raise serving 3 at version 1 = %d %+v, want 3, raised 3", s, l)
	}
	if s, l := lineCall(t, o, sign, "POST", path+"/serving", `{"settings_version":1,"ceiling":1}`); s != 200 || l.ServingCeiling != 3 {
		t.Errorf("report 1 after a raise to 3 = %d %+v, want 3 kept: the raise may reach Redis after the reading", s, l)
	}
	rate := l.RatePerSecond
	if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"rate_per_s":5,"challenge_bits":17}`); s != 200 || !l.Paused || l.RatePerSecond != 5 ||
		l.ChallengeBits != 17 || l.SettingsVersion != 2 {
		t.Errorf("PUT settings rate 5, challenge 17 = %d %+v, want rate 5, challenge 17, still paused, version 2 (rate before: %v)", s, l, rate)
	}
	// An edge whose clock runs 4 minutes fast pauses; a correctly clocked
	// edge resumes right after, and a minute-slow one pauses again: each
	// takes effect in the order it arrives.
	fast := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, clock.NewFake(time.Now().Add(4*time.Minute)))
	slow := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, clock.NewFake(time.Now().Add(-time.Minute)))
	for i, c := range []struct {
		signer *tokens.RequestSigner
		clock  string
		body   string
		paused bool
	}{
		{fast, "4 min fast", `{"paused":true}`, true},
		{sign, "right", `{"paused":false}`, false},
		{slow, "1 min slow", `{"paused":true}`, true},
	} {
		if s, l := lineCall(t, o, c.signer, "PUT", path+"/settings", c.body); s != 200 || l.Paused != c.paused || l.SettingsVersion != int64(3+i) {
			t.Errorf("PUT settings %s from a clock %s = %d %+v, want 200 paused=%v at version %d", c.body, c.clock, s, l, c.paused, 3+i)
		}
	}
	// The same signed request sent again: refused, nothing changes.
	body := []byte(`{"paused":false}`)
	replayed := origintest.Request{Method: "PUT", Path: path + "/settings", Body: body,
		Header: map[string]string{tokens.RequestSignatureHeader: sign.Sign("PUT", path+"/settings", body)}}
	if s, b := o.Do(t, replayed); s != 200 {
		t.Errorf("PUT settings resume = %d %s, want 200", s, b)
	}
	if s, b := o.Do(t, replayed); s != 401 || origintest.ErrorCode(b) != "replayed_request" {
		t.Errorf("the same signed PUT settings again = %d %s, want 401 replayed_request", s, b)
	}
	if s, l := lineCall(t, o, sign, "GET", path, ""); s != 200 || l.Paused || l.SettingsVersion != 6 {
		t.Errorf("line after a replayed change = %d %+v, want not paused at version 6", s, l)
	}

	// The draw size is set once.
	if s, l := lineCall(t, o, sign, "POST", path+"/draw", `{"pre_queue":37}`); s != 200 || l.DrawSize == nil || *l.DrawSize != 37 {
		t.Errorf("seal draw 37 = %d %+v, want draw_size 37", s, l)
	}
	if s, l := lineCall(t, o, sign, "POST", path+"/draw", `{"pre_queue":50}`); s != 200 || l.DrawSize == nil || *l.DrawSize != 37 {
		t.Errorf("seal draw 50 after 37 = %d %+v, want draw_size still 37", s, l)
	}
	if s, l := lineCall(t, o, sign, "GET", path, ""); s != 200 || l.Seed != seeds[0] || l.Paused || l.RatePerSecond != 5 ||
		l.PreCeiling != 10 || l.PostCeiling != 1190 || l.ServingCeiling != 3 || *l.DrawSize != 37 || l.ChallengeBits != 17 {
		t.Errorf("GET line at the end = %d %+v, want everything as set", s, l)
	}
}

// TestLineRoutesRefuse: unsigned, forged, stale or misdirected requests (to
// another sale, or signed for another origin sharing the keys) are
// 401 and change nothing; bad bodies are 400 (415 without JSON) with their
// codes; nothing a client sends makes a 5xx.
func TestLineRoutesRefuse(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	sale := "refuse-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	path := "/v1/lines/" + sale
	if s, l := lineCall(t, o, sign, "POST", path, `{"seed":"`+seedA+`","rate_per_s":5}`); s != 200 {
		t.Fatalf("POST line = %d %+v, want 200", s, l)
	}

	forged := tokens.NewRequestSigner(tokenstest.OtherKeySet(), publicHost, nil)
	staging := tokens.NewRequestSigner(tokenstest.KeySet(), "origin.staging.example", nil)
	stale := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, clock.NewFake(time.Now().Add(-10*time.Minute)))
	auth := []struct {
		name   string
		header string
		method string
		path   string
		body   string
		want   string
	}{
		{"unsigned", "", "POST", path + "/ceilings", `{"post":999}`, "missing_token"},
		{"another key", forged.Sign("POST", path+"/ceilings", []byte(`{"post":999}`)), "POST", path + "/ceilings", `{"post":999}`, "invalid_token"},
		{"signed for another body", sign.Sign("POST", path+"/ceilings", []byte(`{"post":1}`)), "POST", path + "/ceilings", `{"post":999}`, "invalid_token"},
		{"signed for another sale", sign.Sign("POST", "/v1/lines/other/ceilings", []byte(`{"post":999}`)), "POST", path + "/ceilings", `{"post":999}`, "invalid_token"},
		{"signed for another origin", staging.Sign("POST", path+"/ceilings", []byte(`{"post":999}`)), "POST", path + "/ceilings", `{"post":999}`, "invalid_token"},
		{"signed ten minutes ago", stale.Sign("POST", path+"/ceilings", []byte(`{"post":999}`)), "POST", path + "/ceilings", `{"post":999}`, "token_expired"},
		{"garbage", "kid=test1,t=x,v1=y", "POST", path + "/ceilings", `{"post":999}`, "invalid_token"},
		{"bearer admission token", "", "PUT", path + "/settings", `{"paused":false}`, "missing_token"},
		{"unsigned read", "", "GET", path, "", "missing_token"},
	}
	for _, tc := range auth {
		r := origintest.Request{Method: tc.method, Path: tc.path, Header: map[string]string{}}
		if tc.body != "" {
			r.Body = []byte(tc.body)
		}
		if tc.header != "" {
			r.Header[tokens.RequestSignatureHeader] = tc.header
		}
		if tc.name == "bearer admission token" {
			r.Token = o.AdmissionToken(t, sale, "someone")
		}
		if s, b := o.Do(t, r); s != 401 || origintest.ErrorCode(b) != tc.want {
			t.Errorf("%s: %s %s = %d %s, want 401 %s", tc.name, tc.method, tc.path, s, b, tc.want)
		}
	}
	if s, l := lineCall(t, o, sign, "GET", path, ""); s != 200 || l.PostCeiling != 0 || l.Paused {
		t.Errorf("line after refused requests = %d %+v, want nothing changed", s, l)
	}

	bad := []struct {
		method, path, contentType, body string
		status                          int
		want                            string
	}{
		{"POST", path, "", `{"seed":"xyz","rate_per_s":5}`, 400, "invalid_seed"},
		{"POST", path, "", `{"seed":"` + strings.ToUpper(seedA) + `","rate_per_s":5}`, 400, "invalid_seed"},
		{"POST", path, "", `{"seed":"` + seedA + `"}`, 400, "invalid_rate"},
		{"POST", path, "", `{"seed":"` + seedA + `","rate_per_s":-1}`, 400, "invalid_rate"},
		{"POST", path, "", `{"seed":"` + seedA + `","rate_per_s":5,"extra":1}`, 400, "unknown_field"},
		{"POST", path, "", `{"seed":`, 400, "invalid_json"},
		{"POST", path, "text/plain", `{"seed":"` + seedA + `","rate_per_s":5}`, 415, "unsupported_media_type"},
		{"PUT", path + "/settings", "", `{}`, 400, "empty_change"},
		{"PUT", path + "/settings", "", `{"rate_per_s":2000000}`, 400, "invalid_rate"},
		{"PUT", path + "/settings", "", `{"paused":"yes"}`, 400, "invalid_field"},
		{"PUT", path + "/settings", "", `{"challenge_bits":33}`, 400, "invalid_challenge_bits"},
		{"PUT", path + "/settings", "", `{"challenge_bits":-1}`, 400, "invalid_challenge_bits"},
		{"POST", path + "/ceilings", "", `{}`, 400, "empty_change"},
		{"POST", path + "/ceilings", "", `{"post":-5}`, 400, "invalid_ceiling"},
		{"POST", path + "/ceilings", "", `{"post":1e30}`, 400, "invalid_field"},
		{"POST", path + "/ceilings", "", `{"post":1.5}`, 400, "invalid_field"},
		{"POST", path + "/ceilings", "", `{"serving":5}`, 400, "invalid_settings_version"},
		{"POST", path + "/ceilings", "", `{"serving":5,"settings_version":-1}`, 400, "invalid_settings_version"},
		{"POST", path + "/serving", "", `{"ceiling":5}`, 400, "invalid_settings_version"},
		{"POST", path + "/serving", "", `{"settings_version":0}`, 400, "invalid_ceiling"},
		{"POST", path + "/serving", "", `{"settings_version":0,"ceiling":-1}`, 400, "invalid_ceiling"},
		{"POST", path + "/draw", "", `{}`, 400, "invalid_pre_queue"},
		{"POST", "/v1/lines/bad%20id/draw", "", `{"pre_queue":1}`, 404, "unknown_sale"},
		{"POST", "/v1/lines/unknown/ceilings", "", `{"post":1}`, 404, "unknown_sale"},
	}
	for _, tc := range bad {
		r := origintest.Request{Method: tc.method, Path: tc.path, ContentType: tc.contentType, Body: []byte(tc.body),
			Header: map[string]string{}}
		// Sign the path as the server will see it, decoded.
		signedPath := strings.ReplaceAll(tc.path, "%20", " ")
		r.Header[tokens.RequestSignatureHeader] = sign.Sign(tc.method, signedPath, r.Body)
		if s, b := o.Do(t, r); s != tc.status || origintest.ErrorCode(b) != tc.want {
			t.Errorf("%s %s %s = %d %s, want %d %s", tc.method, tc.path, tc.body, s, b, tc.status, tc.want)
		}
	}
}
