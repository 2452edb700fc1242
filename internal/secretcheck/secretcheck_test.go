package secretcheck_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/secretcheck"
)

func TestStrong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, secret string
		want         string // "" = strong; else a part of the error
	}{
		{"openssl rand -base64 32", "q3J8yQ0u1m+Zb2XJ0nH7pV4sLr9cEwTtA5kDgF6hYiU=", ""},
		{"openssl rand -hex 32", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ""},
		{"a long passphrase of other characters", "correct horse battery staple, then 7 more words!", ""},
		{"empty", "", "empty"},
		{"16 characters", "0123456789abcdef", "at most 64 random bits"},
		{"openssl rand -hex 16", "9f86d081884c7d659a2feaa0c55ad015", "32 hex digits, which hold at most 128 random bits"},
		{"42 base64 characters", "q3J8yQ0u1m+Zb2XJ0nH7pV4sLr9cEwTtA5kDgF6hYi", "at most 252 random bits"},
		{"one character", strings.Repeat("a", 64), "repeats a pattern of 1 characters"},
		{"a repeated word", strings.Repeat("password", 8), "repeats a pattern of 8 characters"},
		{"a repeated word, cut short", strings.Repeat("hunter2!", 6) + "hun", "repeats a pattern of 8 characters"},
		{"a run", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "run of consecutive characters"},
		{"few distinct characters", "abbaabababbbaabbbaaababbabaaabbbabbaabababababbbaaabababbbaaabab", "too few distinct characters"},
	} {
		err := secretcheck.Strong(tc.secret)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Strong(%s) = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Strong(%s) = %v, want an error with %q", tc.name, err, tc.want)
		case err != nil && tc.secret != "" && strings.Contains(err.Error(), tc.secret):
			t.Errorf("Strong(%s) = %v: quotes the secret", tc.name, err)
		}
	}
}

// What the advice makes always passes: 32 random bytes, in base64 (with or
// without padding, standard or URL alphabet) or hex.
func TestRandomSecretsPass(t *testing.T) {
	t.Parallel()
	for range 2000 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b), hex.EncodeToString(b)} {
			if err := secretcheck.Strong(s); err != nil {
				t.Fatalf("Strong(random %q) = %v, want nil", s, err)
			}
		}
	}
}
