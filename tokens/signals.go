package tokens

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// Signals are what the shop's user token says of an account beyond its id,
// when the shop's identity service puts it there: optional claims, each
// absent unless the token carries it with its type (docs/API.md, "The
// shop's signals"). A claim of another type is taken as absent, never as a
// bad token: the signals tune a defence, they do not sign anyone in.
type Signals struct {
	AccountCreated time.Time // account_created_at, a NumericDate; zero when absent
	PhoneVerified  *bool     // phone_verified
	RiskScore      *float64  // risk_score, 0 (trusted) to 100 (certain abuse)
}

// signalClaims are the signals' claims as JSON values, typed one by one.
type signalClaims struct {
	AccountCreated json.RawMessage `json:"account_created_at"`
	PhoneVerified  json.RawMessage `json:"phone_verified"`
	RiskScore      json.RawMessage `json:"risk_score"`
}

// Shopper verifies a user token as Account does and returns its account id
// with the token's signals. Only joins need the signals, so only they pay
// for decoding the claims a second time.
func (v *UserVerifier) Shopper(token string) (string, Signals, error) {
	account, err := v.Account(token)
	if err != nil {
		return "", Signals{}, err
	}
	return account, signalsOf(token), nil
}

// signalsOf reads the signals of a token whose signature is already checked.
func signalsOf(token string) Signals {
	var sig Signals
	_, payload, _, ok := splitCompact(token)
	if !ok {
		return sig
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return sig
	}
	var c signalClaims
	if json.Unmarshal(b, &c) != nil {
		return sig
	}
	var created float64
	if json.Unmarshal(c.AccountCreated, &created) == nil && created > 0 && created < maxNumericDate {
		sig.AccountCreated = time.Unix(int64(created), 0)
	}
	var phone bool
	if json.Unmarshal(c.PhoneVerified, &phone) == nil && isJSONBool(c.PhoneVerified) {
		sig.PhoneVerified = &phone
	}
	var risk float64
	if json.Unmarshal(c.RiskScore, &risk) == nil && len(c.RiskScore) > 0 && c.RiskScore[0] != 'n' && risk >= 0 {
		risk = min(risk, 100) // beyond the scale is at its end, never trusted
		sig.RiskScore = &risk
	}
	return sig
}

// isJSONBool: json.Unmarshal takes null into a bool silently.
func isJSONBool(v json.RawMessage) bool { return string(v) == "true" || string(v) == "false" }
