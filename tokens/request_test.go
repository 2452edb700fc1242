package tokens_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// host is the origin the tests' requests are signed for.
const host = "origin.prod.example:9090"

// TestRequestSignature: a signed control request verifies under the same
// key set (and under a rotated set that still holds the key), and every
// change to it — method, path, body, time, kid, MAC, key, the origin it
// was signed for — fails with the sentinel its code is built from.
func TestRequestSignature(t *testing.T) {
	clock := tokenstest.NewClock(time.Time{})
	signer := tokens.NewRequestSigner(tokenstest.KeySet(), host, clock.Now)
	verifier := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: clock.Now})
	body := []byte(`{"post":4096}`)
	sig := signer.Sign("POST", "/v1/lines/s1/ceilings", body)
	at, err := verifier.Verify(sig, host, "POST", "/v1/lines/s1/ceilings", body)
	if err != nil || !at.Equal(clock.Now()) {
		t.Fatalf("Verify(own signature) = %v, %v; want nil and the signing time %v", at, err, clock.Now())
	}

	rotated, err := tokens.ParseKeySet(tokenstest.OtherKeySet().String() + "," + tokenstest.KeySet().String())
	if err != nil {
		t.Fatalf("ParseKeySet(rotated) = %v", err)
	}
	if _, err := tokens.NewRequestVerifier(rotated, tokens.RequestVerifierOptions{Now: clock.Now}).Verify(sig, host, "POST", "/v1/lines/s1/ceilings", body); err != nil {
		t.Errorf("Verify under a set that still holds the signing key = %v, want nil", err)
	}

	foreign := tokens.NewRequestSigner(tokenstest.OtherKeySet(), host, clock.Now).Sign("POST", "/v1/lines/s1/ceilings", body)
	forgedKID := strings.Replace(foreign, "kid="+tokenstest.OtherKID, "kid="+tokenstest.KID, 1)
	mac := sig[strings.Index(sig, "v2=")+3:]
	nonceAt := strings.Index(sig, ",n=") + 3
	nonceSwapped := sig[:nonceAt] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", sig[nonceAt])+1)%16]) + sig[nonceAt+1:]
	flipped := sig[:len(sig)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", sig[len(sig)-1])+1)%16])
	cases := []struct {
		name                       string
		header, host, method, path string
		body                       []byte
		advance                    time.Duration
		want                       error
	}{
		{"no header", "", host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMissing},
		{"not the form", "Bearer abc", host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"no time", "kid=test1,n=ab,v2=" + mac, host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"no nonce", strings.Replace(sig, ",n=", ",x=", 1), host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"other nonce", nonceSwapped, host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"short mac", "kid=test1,t=1,n=ab,v2=abcd", host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"other method", sig, host, "PUT", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"other path", sig, host, "POST", "/v1/lines/s2/ceilings", body, 0, tokens.ErrInvalid},
		{"other body", sig, host, "POST", "/v1/lines/s1/ceilings", []byte(`{"post":9999}`), 0, tokens.ErrInvalid},
		{"flipped mac", flipped, host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"unknown kid", foreign, host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"another key under our kid", forgedKID, host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"too old", sig, host, "POST", "/v1/lines/s1/ceilings", body, tokens.DefaultRequestTolerance + time.Second, tokens.ErrExpired},
		{"from the future", sig, host, "POST", "/v1/lines/s1/ceilings", body, -tokens.DefaultRequestTolerance - time.Second, tokens.ErrExpired},
		{"another origin", sig, "origin.staging.example:9090", "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"v1 form", strings.Replace(sig, "v2=", "v1=", 1), host, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tokenstest.NewClock(clock.Now().Add(tc.advance))
			v := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: c.Now})
			if _, err := v.Verify(tc.header, tc.host, tc.method, tc.path, tc.body); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}

	// Within the tolerance either way, it still verifies.
	for _, d := range []time.Duration{tokens.DefaultRequestTolerance - time.Second, -tokens.DefaultRequestTolerance + time.Second} {
		c := tokenstest.NewClock(clock.Now().Add(d))
		if _, err := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: c.Now}).Verify(sig, host, "POST", "/v1/lines/s1/ceilings", body); err != nil {
			t.Errorf("Verify %v from the signing time = %v, want nil", d, err)
		}
	}
}

// TestRequestAudience: a verifier with an audience configured takes requests
// signed for it whatever Host they carry, and refuses those signed for
// another (say staging's origin, sharing production's keys) even when the
// Host is its own.
func TestRequestAudience(t *testing.T) {
	clock := tokenstest.NewClock(time.Time{})
	body := []byte(`{"paused":true}`)
	prod := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: clock.Now, Audience: "production"})
	cases := []struct {
		name, signedFor, host string
		want                  error
	}{
		{"signed for it", "production", "10.0.0.7:9090", nil},
		{"signed for staging", "staging", "10.0.0.7:9090", tokens.ErrInvalid},
		{"signed for its host, not its audience", "10.0.0.7:9090", "10.0.0.7:9090", tokens.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sig := tokens.NewRequestSigner(tokenstest.KeySet(), tc.signedFor, clock.Now).Sign("PUT", "/v1/lines/s1/settings", body)
			if _, err := prod.Verify(sig, tc.host, "PUT", "/v1/lines/s1/settings", body); !errors.Is(err, tc.want) {
				t.Errorf("Verify(signed for %q, Host %q) = %v, want %v", tc.signedFor, tc.host, err, tc.want)
			}
		})
	}
}

// TestRequestReplay: the same signed request sent twice is refused the
// second time (ErrReplayed, code replayed_request) while another request
// signed in the same millisecond is not, the same request signed again
// included (its nonce differs); a signature forgotten because it
// is past the tolerance is refused as expired; and with the memory full
// the earliest-signed signature is forgotten, and every request signed at
// or before it is refused from then on — never a replay let through.
func TestRequestReplay(t *testing.T) {
	clock := tokenstest.NewClock(time.Time{})
	signer := tokens.NewRequestSigner(tokenstest.KeySet(), host, clock.Now)
	v := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: clock.Now, ReplayCapacity: 3})
	verify := func(sig, path string) error {
		_, err := v.Verify(sig, host, "PUT", path, []byte(`{"paused":true}`))
		return err
	}
	sign := func(path string) string { return signer.Sign("PUT", path, []byte(`{"paused":true}`)) }

	first := sign("/v1/lines/s1/settings")
	if err := verify(first, "/v1/lines/s1/settings"); err != nil {
		t.Fatalf("Verify(first) = %v, want nil", err)
	}
	err := verify(first, "/v1/lines/s1/settings")
	if !errors.Is(err, tokens.ErrReplayed) || !errors.Is(err, tokens.ErrInvalid) || tokens.Code(err) != "replayed_request" {
		t.Errorf("Verify(first) again = %v (code %q), want ErrReplayed and ErrInvalid, code replayed_request", err, tokens.Code(err))
	}
	if err := verify(sign("/v1/lines/s2/settings"), "/v1/lines/s2/settings"); err != nil {
		t.Errorf("Verify(another request, same millisecond) = %v, want nil", err)
	}
	if err := verify(sign("/v1/lines/s1/settings"), "/v1/lines/s1/settings"); err != nil {
		t.Errorf("Verify(the same request signed again, same millisecond) = %v, want nil", err)
	}

	// Past the tolerance the memory lets it go; the clock check refuses it.
	clock.Advance(tokens.DefaultRequestTolerance + time.Second)
	if err := verify(first, "/v1/lines/s1/settings"); !errors.Is(err, tokens.ErrExpired) {
		t.Errorf("Verify(first) past the tolerance = %v, want ErrExpired", err)
	}

	// Full: three remembered (t0, t0+1s, t0+2s); a fourth forgets t0 and
	// refuses anything signed at or before it.
	var sigs []string
	for i := range 4 {
		sigs = append(sigs, sign(fmt.Sprintf("/v1/lines/f%d/settings", i)))
		clock.Advance(time.Second)
	}
	for i := range 3 {
		if err := verify(sigs[i+1], fmt.Sprintf("/v1/lines/f%d/settings", i+1)); err != nil {
			t.Fatalf("Verify(f%d) = %v, want nil", i+1, err)
		}
	}
	if err := verify(sigs[0], "/v1/lines/f0/settings"); !errors.Is(err, tokens.ErrReplayed) {
		t.Errorf("Verify(f0, signed before what a full memory keeps) = %v, want ErrReplayed (it cannot be told from a replay)", err)
	}
	if err := verify(sign("/v1/lines/f4/settings"), "/v1/lines/f4/settings"); err != nil {
		t.Errorf("Verify(f4, signed after) = %v, want nil: the earliest remembered is forgotten", err)
	}
	for i := 1; i < 4; i++ {
		if err := verify(sigs[i], fmt.Sprintf("/v1/lines/f%d/settings", i)); !errors.Is(err, tokens.ErrReplayed) {
			t.Errorf("Verify(f%d) again with the memory full = %v, want ErrReplayed", i, err)
		}
	}
}
