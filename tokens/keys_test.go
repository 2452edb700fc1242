package tokens_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

var (
	secretA = bytes.Repeat([]byte{'a'}, 32)
	secretB = bytes.Repeat([]byte{'b'}, 40)
)

func b64std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestParseKeySet(t *testing.T) {
	a, b := b64std(secretA), b64std(secretB)
	tests := []struct {
		name       string
		spec       string
		wantActive string
		wantKIDs   []string
	}{
		{"one key", "k1:" + a, "k1", []string{"k1"}},
		{"first is active", "k2:" + b + ",k1:" + a, "k2", []string{"k2", "k1"}},
		{"order kept", "k1:" + a + ",k2:" + b, "k1", []string{"k1", "k2"}},
		{"padding optional", "k1:" + strings.TrimRight(a, "="), "k1", []string{"k1"}},
		{"blanks trimmed", " k2:" + b + " , k1:" + a + "\n", "k2", []string{"k2", "k1"}},
		{"kid alphabet", "A-z_0.9:" + a, "A-z_0.9", []string{"A-z_0.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := tokens.ParseKeySet(tt.spec)
			if err != nil {
				t.Fatalf("ParseKeySet(%q) err = %v, want nil", tt.spec, err)
			}
			if got := ks.ActiveKID(); got != tt.wantActive {
				t.Errorf("ActiveKID() = %q, want %q", got, tt.wantActive)
			}
			if got := ks.KIDs(); fmt.Sprint(got) != fmt.Sprint(tt.wantKIDs) {
				t.Errorf("KIDs() = %v, want %v", got, tt.wantKIDs)
			}
			again, err := tokens.ParseKeySet(ks.String())
			if err != nil || again.String() != ks.String() {
				t.Errorf("ParseKeySet(String()) = %v, %v; want the same set", again, err)
			}
		})
	}
}

func TestParseKeySetErrors(t *testing.T) {
	a := b64std(secretA)
	short := b64std(secretA[:31])
	tests := []struct {
		name, spec string
	}{
		{"empty", ""},
		{"blank", "  "},
		{"no colon", "k1" + a},
		{"empty secret", "k1:"},
		{"short secret", "k1:" + short},
		{"bad base64", "k1:!!notbase64!!"},
		{"url base64", "k1:" + strings.NewReplacer("+", "-", "/", "_").Replace(b64std(bytes.Repeat([]byte{0xfb, 0xff}, 16)))},
		{"duplicate kid", "k1:" + a + ",k1:" + b64std(secretB)},
		{"empty kid", ":" + a},
		{"bad kid", "k 1:" + a},
		{"long kid", strings.Repeat("k", 33) + ":" + a},
		{"trailing comma", "k1:" + a + ","},
		{"empty entry", "k1:" + a + ",,k2:" + a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := tokens.ParseKeySet(tt.spec)
			if err == nil {
				t.Fatalf("ParseKeySet(%q) = %v, want error", tt.spec, ks)
			}
			// Errors must never echo secrets.
			if s := strings.TrimRight(a, "="); strings.Contains(err.Error(), s) {
				t.Errorf("ParseKeySet(%q) err = %q contains the secret", tt.spec, err)
			}
		})
	}
}

func TestNewKeySet(t *testing.T) {
	tests := []struct {
		name    string
		active  string
		secrets map[string][]byte
		wantErr bool
	}{
		{"ok", "k2", map[string][]byte{"k1": secretA, "k2": secretB}, false},
		{"empty", "k1", nil, true},
		{"active missing", "k3", map[string][]byte{"k1": secretA}, true},
		{"short secret", "k1", map[string][]byte{"k1": secretA[:31]}, true},
		{"short other secret", "k1", map[string][]byte{"k1": secretA, "k2": secretB[:8]}, true},
		{"bad kid", "k/1", map[string][]byte{"k/1": secretA}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := tokens.NewKeySet(tt.active, tt.secrets)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewKeySet(%q, ...) = %v, %v; want error %v", tt.active, ks, err, tt.wantErr)
			}
			if err == nil && ks.ActiveKID() != tt.active {
				t.Errorf("ActiveKID() = %q, want %q", ks.ActiveKID(), tt.active)
			}
		})
	}
}

func TestNewKeySetCopiesSecrets(t *testing.T) {
	secret := bytes.Clone(secretA)
	ks, err := tokens.NewKeySet("k1", map[string][]byte{"k1": secret})
	if err != nil {
		t.Fatal(err)
	}
	want := ks.String()
	secret[0] = 'z'
	if got := ks.String(); got != want {
		t.Errorf("String() after changing the caller's secret = %q, want %q", got, want)
	}
	if want != "k1:"+b64std(secretA) {
		t.Errorf("String() = %q, want %q", want, "k1:"+b64std(secretA))
	}
}

func TestKeySetFormatHidesSecrets(t *testing.T) {
	ks := tokenstest.KeySet()
	secret := strings.TrimRight(b64std(secretOf(t, ks)), "=")
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		got := fmt.Sprintf(verb, ks)
		if strings.Contains(got, secret) || !strings.Contains(got, tokenstest.KID) {
			t.Errorf("Sprintf(%q, keys) = %q, want kids only", verb, got)
		}
	}
}

func TestGenerateKeySpec(t *testing.T) {
	spec1, err := tokens.GenerateKeySpec("gen1")
	if err != nil {
		t.Fatalf("GenerateKeySpec(gen1) err = %v", err)
	}
	spec2, _ := tokens.GenerateKeySpec("gen1")
	if spec1 == spec2 {
		t.Errorf("GenerateKeySpec twice = %q both times, want fresh secrets", spec1)
	}
	ks, err := tokens.ParseKeySet(spec1)
	if err != nil {
		t.Fatalf("ParseKeySet(GenerateKeySpec()) err = %v", err)
	}
	if ks.ActiveKID() != "gen1" || ks.String() != spec1 || len(secretOf(t, ks)) != tokens.MinSecretLen {
		t.Errorf("ParseKeySet(GenerateKeySpec(gen1)) = %v (%d-byte secret), want kid gen1 and a %d-byte secret",
			ks, len(secretOf(t, ks)), tokens.MinSecretLen)
	}
	for _, bad := range []string{"", "a b", strings.Repeat("x", 33), "k:1"} {
		if _, err := tokens.GenerateKeySpec(bad); err == nil {
			t.Errorf("GenerateKeySpec(%q) err = nil, want error", bad)
		}
	}
}

func TestRotation(t *testing.T) {
	clock := clock.NewFake(tokenstest.Start())
	old := tokenstest.KeySet()
	oldTok, _, err := tokens.NewIssuer(old, tokens.IssuerOptions{Clock: clock}).Admission("s1", "acct-1", 1)
	if err != nil {
		t.Fatal(err)
	}

	newSpec, err := tokens.GenerateKeySpec("test2")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := tokens.ParseKeySet(newSpec + "," + old.String())
	if err != nil {
		t.Fatalf("ParseKeySet(new,old) err = %v", err)
	}
	if rotated.ActiveKID() != "test2" {
		t.Fatalf("ActiveKID() = %q, want test2", rotated.ActiveKID())
	}
	newTok, _, err := tokens.NewIssuer(rotated, tokens.IssuerOptions{Clock: clock}).Admission("s1", "acct-2", 2)
	if err != nil {
		t.Fatal(err)
	}

	opts := tokens.VerifierOptions{Clock: clock}
	tests := []struct {
		name  string
		keys  *tokens.KeySet
		token string
		want  error
	}{
		{"old token, rotated verifier", rotated, oldTok, nil},
		{"new token, rotated verifier", rotated, newTok, nil},
		{"new token, old verifier", old, newTok, tokens.ErrInvalid},
		{"old token, new key only", mustParse(t, newSpec), oldTok, tokens.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tokens.NewVerifier(tt.keys, opts).Admission(tt.token, "s1")
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("Admission(tok) err = %v, want %v", err, tt.want)
			}
		})
	}
}

func mustParse(t *testing.T, spec string) *tokens.KeySet {
	t.Helper()
	ks, err := tokens.ParseKeySet(spec)
	if err != nil {
		t.Fatalf("ParseKeySet err = %v", err)
	}
	return ks
}

// TestSharedSecret: a secret is found in a key set when it is one of the
// keys' secrets, or a key's secret as the spec spells it, whichever key.
func TestSharedSecret(t *testing.T) {
	ks := mustParse(t, "k2:"+b64std(secretB)+",k1:"+b64std(secretA))
	tests := []struct {
		name    string
		secret  []byte
		wantKID string // "" = not shared
	}{
		{"the active key's secret", secretB, "k2"},
		{"another key's secret", secretA, "k1"},
		{"its base64", []byte(b64std(secretA)), "k1"},
		{"its base64 without padding", []byte(strings.TrimRight(b64std(secretB), "=")), "k2"},
		{"a prefix of it", secretA[:31], ""},
		{"longer", append(bytes.Clone(secretA), 'a'), ""},
		{"another secret", bytes.Repeat([]byte{'c'}, 32), ""},
		{"empty", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kid, ok := ks.SharedSecret(tt.secret)
			if kid != tt.wantKID || ok != (tt.wantKID != "") {
				t.Errorf("SharedSecret(%s) = %q, %v; want %q, %v", tt.name, kid, ok, tt.wantKID, tt.wantKID != "")
			}
		})
	}
}
