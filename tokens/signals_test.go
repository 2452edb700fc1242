package tokens_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/tokens"
)

func TestShopperSignals(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name                string
		extra               jwt.MapClaims
		wantCreated         time.Time
		wantPhone, wantRisk string // "" absent, else the value
	}{
		{"absent", nil, time.Time{}, "", ""},
		{"all", jwt.MapClaims{"account_created_at": created.Unix(), "phone_verified": false, "risk_score": 72.5},
			created, "false", "72.5"},
		{"phone true", jwt.MapClaims{"phone_verified": true}, time.Time{}, "true", ""},
		{"wrong types are absent", jwt.MapClaims{"account_created_at": "yesterday", "phone_verified": "yes", "risk_score": "high"},
			time.Time{}, "", ""},
		{"null is absent", jwt.MapClaims{"phone_verified": nil, "risk_score": nil}, time.Time{}, "", ""},
		{"risk beyond the scale is at its end", jwt.MapClaims{"risk_score": 250}, time.Time{}, "", "100"},
		{"negative risk is absent", jwt.MapClaims{"risk_score": -1}, time.Time{}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claims := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
			for k, val := range tc.extra {
				claims[k] = val
			}
			token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			account, sig, err := v.Shopper(token)
			if err != nil || account != "alice" {
				t.Fatalf("Shopper = %q, %v; want alice", account, err)
			}
			if !sig.AccountCreated.Equal(tc.wantCreated) {
				t.Errorf("AccountCreated = %v, want %v", sig.AccountCreated, tc.wantCreated)
			}
			if got := boolString(sig.PhoneVerified); got != tc.wantPhone {
				t.Errorf("PhoneVerified = %q, want %q", got, tc.wantPhone)
			}
			if got := floatString(sig.RiskScore); got != tc.wantRisk {
				t.Errorf("RiskScore = %q, want %q", got, tc.wantRisk)
			}
		})
	}
	if _, _, err := v.Shopper("not.a.token"); err == nil {
		t.Error("Shopper accepted a bad token")
	}
}

func boolString(b *bool) string {
	if b == nil {
		return ""
	}
	if *b {
		return "true"
	}
	return "false"
}

func floatString(f *float64) string {
	if f == nil {
		return ""
	}
	return strconv.FormatFloat(*f, 'f', -1, 64)
}
