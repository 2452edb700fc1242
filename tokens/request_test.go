package tokens_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// TestRequestSignature: a signed control request verifies under the same
// key set (and under a rotated set that still holds the key), and every
// change to it — method, path, body, time, kid, MAC, key — fails with the
// sentinel its code is built from.
func TestRequestSignature(t *testing.T) {
	clock := tokenstest.NewClock(time.Time{})
	signer := tokens.NewRequestSigner(tokenstest.KeySet(), clock.Now)
	verifier := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: clock.Now})
	body := []byte(`{"post":4096}`)
	sig := signer.Sign("POST", "/v1/lines/s1/ceilings", body)
	at, err := verifier.Verify(sig, "POST", "/v1/lines/s1/ceilings", body)
	if err != nil || !at.Equal(clock.Now()) {
		t.Fatalf("Verify(own signature) = %v, %v; want nil and the signing time %v", at, err, clock.Now())
	}

	rotated, err := tokens.ParseKeySet(tokenstest.OtherKeySet().String() + "," + tokenstest.KeySet().String())
	if err != nil {
		t.Fatalf("ParseKeySet(rotated) = %v", err)
	}
	if _, err := tokens.NewRequestVerifier(rotated, tokens.RequestVerifierOptions{Now: clock.Now}).Verify(sig, "POST", "/v1/lines/s1/ceilings", body); err != nil {
		t.Errorf("Verify under a set that still holds the signing key = %v, want nil", err)
	}

	foreign := tokens.NewRequestSigner(tokenstest.OtherKeySet(), clock.Now).Sign("POST", "/v1/lines/s1/ceilings", body)
	forgedKID := strings.Replace(foreign, "kid="+tokenstest.OtherKID, "kid="+tokenstest.KID, 1)
	mac := sig[strings.Index(sig, "v1=")+3:]
	flipped := sig[:len(sig)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", sig[len(sig)-1])+1)%16])
	cases := []struct {
		name                 string
		header, method, path string
		body                 []byte
		advance              time.Duration
		want                 error
	}{
		{"no header", "", "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMissing},
		{"not the form", "Bearer abc", "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"no time", "kid=test1,v1=" + mac, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"short mac", "kid=test1,t=1,v1=abcd", "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"other method", sig, "PUT", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"other path", sig, "POST", "/v1/lines/s2/ceilings", body, 0, tokens.ErrInvalid},
		{"other body", sig, "POST", "/v1/lines/s1/ceilings", []byte(`{"post":9999}`), 0, tokens.ErrInvalid},
		{"flipped mac", flipped, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"unknown kid", foreign, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"another key under our kid", forgedKID, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"too old", sig, "POST", "/v1/lines/s1/ceilings", body, tokens.DefaultRequestTolerance + time.Second, tokens.ErrExpired},
		{"from the future", sig, "POST", "/v1/lines/s1/ceilings", body, -tokens.DefaultRequestTolerance - time.Second, tokens.ErrExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tokenstest.NewClock(clock.Now().Add(tc.advance))
			v := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: c.Now})
			if _, err := v.Verify(tc.header, tc.method, tc.path, tc.body); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}

	// Within the tolerance either way, it still verifies.
	for _, d := range []time.Duration{tokens.DefaultRequestTolerance - time.Second, -tokens.DefaultRequestTolerance + time.Second} {
		c := tokenstest.NewClock(clock.Now().Add(d))
		if _, err := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Now: c.Now}).Verify(sig, "POST", "/v1/lines/s1/ceilings", body); err != nil {
			t.Errorf("Verify %v from the signing time = %v, want nil", d, err)
		}
	}
}
