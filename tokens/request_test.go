package tokens_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// host is the origin the tests' requests are signed for: the verifiers'
// audience.
const host = "origin.prod.example:9090"

// newVerifier is a verifier for host on clock c.
func newVerifier(t *testing.T, keys *tokens.KeySet, c clock.Clock) *tokens.RequestVerifier {
	t.Helper()
	v, err := tokens.NewRequestVerifier(keys, tokens.RequestVerifierOptions{Clock: c, Audience: host})
	if err != nil {
		t.Fatalf("NewRequestVerifier = %v", err)
	}
	return v
}

// TestRequestSignature: a signed control request verifies under the same
// key set (and under a rotated set that still holds the key), and every
// change to it — method, path, body, time, nonce, kid, MAC, key — fails
// with the sentinel its code is built from (TestRequestAudience: the
// origin it was signed for).
func TestRequestSignature(t *testing.T) {
	fake := clock.NewFake(tokenstest.Start())
	signer := tokens.NewRequestSigner(tokenstest.KeySet(), host, fake)
	verifier := newVerifier(t, tokenstest.KeySet(), fake)
	body := []byte(`{"post":4096}`)
	sig := signer.Sign("POST", "/v1/lines/s1/ceilings", body)
	got, err := verifier.Verify(sig, "POST", "/v1/lines/s1/ceilings", body)
	if err != nil || !got.Signed.Equal(fake.Now()) || !got.Until.Equal(fake.Now().Add(tokens.DefaultRequestTolerance)) {
		t.Fatalf("Verify(own signature) = %+v, %v; want nil, signed at %v, taken until %v", got, err, fake.Now(), fake.Now().Add(tokens.DefaultRequestTolerance))
	}

	rotated, err := tokens.ParseKeySet(tokenstest.OtherKeySet().String() + "," + tokenstest.KeySet().String())
	if err != nil {
		t.Fatalf("ParseKeySet(rotated) = %v", err)
	}
	if _, err := newVerifier(t, rotated, fake).Verify(sig, "POST", "/v1/lines/s1/ceilings", body); err != nil {
		t.Errorf("Verify under a set that still holds the signing key = %v, want nil", err)
	}

	foreign := tokens.NewRequestSigner(tokenstest.OtherKeySet(), host, fake).Sign("POST", "/v1/lines/s1/ceilings", body)
	forgedKID := strings.Replace(foreign, "kid="+tokenstest.OtherKID, "kid="+tokenstest.KID, 1)
	mac := sig[strings.Index(sig, "v2=")+3:]
	nonceAt := strings.Index(sig, ",n=") + 3
	nonceSwapped := sig[:nonceAt] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", sig[nonceAt])+1)%16]) + sig[nonceAt+1:]
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
		{"no time", "kid=test1,n=ab,v2=" + mac, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"no nonce", strings.Replace(sig, ",n=", ",x=", 1), "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"other nonce", nonceSwapped, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"short mac", "kid=test1,t=1,n=ab,v2=abcd", "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
		{"other method", sig, "PUT", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"other path", sig, "POST", "/v1/lines/s2/ceilings", body, 0, tokens.ErrInvalid},
		{"other body", sig, "POST", "/v1/lines/s1/ceilings", []byte(`{"post":9999}`), 0, tokens.ErrInvalid},
		{"flipped mac", flipped, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"unknown kid", foreign, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"another key under our kid", forgedKID, "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrInvalid},
		{"too old", sig, "POST", "/v1/lines/s1/ceilings", body, tokens.DefaultRequestTolerance + time.Second, tokens.ErrExpired},
		{"from the future", sig, "POST", "/v1/lines/s1/ceilings", body, -tokens.DefaultRequestTolerance - time.Second, tokens.ErrExpired},
		{"v1 form", strings.Replace(sig, "v2=", "v1=", 1), "POST", "/v1/lines/s1/ceilings", body, 0, tokens.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clock.NewFake(fake.Now().Add(tc.advance))
			v := newVerifier(t, tokenstest.KeySet(), c)
			if _, err := v.Verify(tc.header, tc.method, tc.path, tc.body); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}

	// Within the tolerance either way, it still verifies.
	for _, d := range []time.Duration{tokens.DefaultRequestTolerance - time.Second, -tokens.DefaultRequestTolerance + time.Second} {
		c := clock.NewFake(fake.Now().Add(d))
		if _, err := newVerifier(t, tokenstest.KeySet(), c).Verify(sig, "POST", "/v1/lines/s1/ceilings", body); err != nil {
			t.Errorf("Verify %v from the signing time = %v, want nil", d, err)
		}
	}
}

// TestRequestAudience: a verifier takes requests signed for its audience
// and refuses those signed for another (say staging's origin, sharing
// production's keys, or the address the request was sent to); it has no
// audience but the one it was given, and will not be made without one.
func TestRequestAudience(t *testing.T) {
	fake := clock.NewFake(tokenstest.Start())
	body := []byte(`{"paused":true}`)
	prod, err := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{Clock: fake, Audience: "production"})
	if err != nil {
		t.Fatalf("NewRequestVerifier(production) = %v", err)
	}
	cases := []struct {
		name, signedFor string
		want            error
	}{
		{"signed for it", "production", nil},
		{"signed for staging", "staging", tokens.ErrInvalid},
		{"signed for its address, not its audience", "10.0.0.7:9090", tokens.ErrInvalid},
		{"signed for no audience", "", tokens.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sig := tokens.NewRequestSigner(tokenstest.KeySet(), tc.signedFor, fake).Sign("PUT", "/v1/lines/s1/settings", body)
			if _, err := prod.Verify(sig, "PUT", "/v1/lines/s1/settings", body); !errors.Is(err, tc.want) {
				t.Errorf("Verify(signed for %q) = %v, want %v", tc.signedFor, err, tc.want)
			}
		})
	}
	if v, err := tokens.NewRequestVerifier(tokenstest.KeySet(), tokens.RequestVerifierOptions{}); err == nil {
		t.Errorf("NewRequestVerifier(no audience) = %v, nil; want an error", v)
	}
}

// TestRequestSignatureKey: the verifier remembers nothing, and names each
// signature by a Key its caller records to refuse it sent again: the same
// signature has the same Key however its MAC's hex is written, while
// another request signed in the same millisecond has its own, the same
// request signed again included (its nonce differs). ErrReplayed, which
// that caller returns, is refused like a forged signature, with its own
// code.
func TestRequestSignatureKey(t *testing.T) {
	fake := clock.NewFake(tokenstest.Start())
	signer := tokens.NewRequestSigner(tokenstest.KeySet(), host, fake)
	v := newVerifier(t, tokenstest.KeySet(), fake)
	body := []byte(`{"paused":true}`)
	key := func(sig, path string) string {
		t.Helper()
		got, err := v.Verify(sig, "PUT", path, body)
		if err != nil {
			t.Fatalf("Verify(%s) = %v, want nil", sig, err)
		}
		return got.Key
	}
	first := signer.Sign("PUT", "/v1/lines/s1/settings", body)
	k := key(first, "/v1/lines/s1/settings")
	if !strings.HasPrefix(k, tokenstest.KID+":") {
		t.Errorf("Key = %q, want the kid %q first", k, tokenstest.KID)
	}
	if again := key(first, "/v1/lines/s1/settings"); again != k {
		t.Errorf("Key of the same signature again = %q, want %q", again, k)
	}
	at := strings.Index(first, "v2=") + 3
	upper := first[:at] + strings.ToUpper(first[at:])
	if got := key(upper, "/v1/lines/s1/settings"); got != k {
		t.Errorf("Key of the same signature, MAC in upper case = %q, want %q", got, k)
	}
	seen := map[string]bool{k: true}
	for _, path := range []string{"/v1/lines/s2/settings", "/v1/lines/s1/settings"} {
		got := key(signer.Sign("PUT", path, body), path)
		if seen[got] {
			t.Errorf("Key of another signature of PUT %s in the same millisecond = %q, taken already", path, got)
		}
		seen[got] = true
	}

	err := fmt.Errorf("line request: %w", tokens.ErrReplayed)
	if !errors.Is(err, tokens.ErrInvalid) || tokens.Code(err) != "replayed_request" {
		t.Errorf("ErrReplayed wrapped: ErrInvalid %v, code %q; want ErrInvalid, code replayed_request", errors.Is(err, tokens.ErrInvalid), tokens.Code(err))
	}
}
