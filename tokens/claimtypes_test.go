package tokens_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// A claims payload as ordered JSON text, so that a case can give any claim
// any JSON value, or leave it out.
type payload []claimText

type claimText struct{ name, json string }

// with returns p with claim name set to the JSON text v ("" leaves it out),
// added at the end when p lacks it.
func (p payload) with(name, v string) string {
	var b strings.Builder
	b.WriteByte('{')
	found := false
	for _, c := range p {
		val := c.json
		if c.name == name {
			val, found = v, true
		}
		if val == "" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", c.name, val)
	}
	if !found && v != "" {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", name, v)
	}
	b.WriteByte('}')
	return b.String()
}

// jsonValue is a claim value and the JSON type it has.
type jsonValue struct{ kind, json string }

// jsonValues are values of every JSON type for a claim whose valid value is
// the JSON text canon: canon itself, numbers of every shape (around canon when
// it is one), strings (canon's text among them), booleans, null, arrays and
// objects.
func jsonValues(canon string) []jsonValue {
	var vs []jsonValue
	add := func(kind string, texts ...string) {
		for _, s := range texts {
			vs = append(vs, jsonValue{kind, s})
		}
	}
	add("number", "0", "-0", "1", "-1", "7", "1.5", "-1.5", "1e3", "1E+3", "1e-7", "0.0",
		"123456789012345", "1234567890123456", "9007199254740992", "9007199254740993", "-9007199254740993",
		"99999999999999999999", "1e300", "-1e300", "1e400")
	text := canon
	if n, err := strconv.ParseInt(canon, 10, 64); err == nil {
		add("number", canon, canon+".5", canon+".0", canon+"e0", strconv.FormatInt(-n, 10), canon+"000000")
	} else if s, err := strconv.Unquote(canon); err == nil {
		add("string", canon)
		text = s
	}
	add("string", strconv.Quote(text), strconv.Quote(text+".5"), `"x"`, `""`, `"\u0061"`, `" 1"`, `"1e3"`,
		`"edge"`, `"origin"`, `"flashgate"`)
	add("bool", "true", "false")
	add("null", "null")
	add("array", "[]", "["+canon+"]", "["+canon+","+canon+"]", `["x"]`, "[1]", "[null]", "[[]]")
	add("object", "{}", `{"v":`+canon+"}", `{"exp":1}`)
	return vs
}

// numericDateClaims are the registered time claims: RFC 7519 (section 2)
// makes each a JSON number of seconds.
var numericDateClaims = map[string]bool{"exp": true, "nbf": true, "iat": true}

// maxNumericDate is the largest magnitude of a time claim either path takes.
const maxNumericDate = 1 << 53

// wantRefused reports whether the RFC, whatever golang-jwt would do, refuses
// a token whose claim name has the value v: a time claim that is not a JSON
// number, or one too large to be a time.
func wantRefused(name string, v jsonValue) bool {
	if !numericDateClaims[name] || v.kind == "absent" {
		return false
	}
	if v.kind != "number" {
		return true
	}
	f, err := strconv.ParseFloat(v.json, 64)
	return err != nil || math.Abs(f) > maxNumericDate
}

// claimTypeCase is one token: a payload with one claim given one value.
type claimTypeCase struct {
	desc, claim, payload string
	value                jsonValue // kind "absent": the claim left out
}

// claimTypeCases gives every claim of base, and each of extra, every value
// of jsonValues and none.
func claimTypeCases(base payload, extra []claimText) []claimTypeCase {
	var out []claimTypeCase
	for _, c := range append(append(payload(nil), base...), extra...) {
		values := append(jsonValues(c.json), jsonValue{"absent", ""})
		for _, v := range values {
			out = append(out, claimTypeCase{
				desc:    fmt.Sprintf("%s = %s (%s)", c.name, v.json, v.kind),
				claim:   c.name,
				value:   v,
				payload: base.with(c.name, v.json),
			})
		}
	}
	return out
}

// ourPayloads are valid queue and admission payloads at now, and the claims
// they lack that a token may still carry.
func ourPayloads(now int64) (queue, admission payload, extra []claimText) {
	reg := func(aud string) payload {
		return payload{{"iss", `"flashgate"`}, {"sub", `"acct-1"`}, {"aud", `["` + aud + `"]`},
			{"iat", strconv.FormatInt(now, 10)}, {"exp", strconv.FormatInt(now+3600, 10)}}
	}
	queue = append(reg(tokens.AudienceEdge), claimText{"sale", `"s1"`}, claimText{"pos", "7"}, claimText{"pre", "true"})
	admission = append(reg(tokens.AudienceOrigin), claimText{"jti", `"jti-1"`}, claimText{"sale", `"s1"`}, claimText{"pos", "7"})
	extra = []claimText{{"nbf", strconv.FormatInt(now-10, 10)}, {"jti", `"jti-2"`}, {"pre", "false"}, {"name", `"n"`}}
	return queue, admission, extra
}

// TestFastPathClaimTypes gives every claim of queue and admission tokens a
// value of every JSON type: the fast path and golang-jwt agree on each token
// (accepted with the same claims, or refused with the same error), and both
// refuse a time claim that is not a JSON number, which golang-jwt's own
// NumericDate would take from a string holding one.
func TestFastPathClaimTypes(t *testing.T) {
	f := newFixture(t)
	slow := tokens.SlowOnly(f.ver)
	queue, admission, extra := ourPayloads(f.clock.Now().Unix())
	accepted := 0
	for _, base := range []payload{queue, admission} {
		for _, tc := range claimTypeCases(base, extra) {
			tok := rawHS256(testHeader, tc.payload, f.secret)
			accepted += diffCheck(t, f.ver, slow, tc.desc, tok)
			if !wantRefused(tc.claim, tc.value) {
				continue
			}
			for _, sale := range []string{"s1", "s2"} {
				if _, err := f.ver.Queue(tok, sale); err == nil {
					t.Errorf("Queue(%s, %s) accepted; want a time claim that is not a number refused", tc.payload, sale)
				}
				if _, err := f.ver.Admission(tok, sale); err == nil {
					t.Errorf("Admission(%s, %s) accepted; want a time claim that is not a number refused", tc.payload, sale)
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no case verified")
	}
}

// TestUserFastPathClaimTypes is TestFastPathClaimTypes for user tokens, with
// and without iss and aud checked.
func TestUserFastPathClaimTypes(t *testing.T) {
	clock := clock.NewFake(tokenstest.Start())
	secret := tokenstest.UserSecret()
	now := clock.Now().Unix()
	base := payload{{"iss", `"shop-idp"`}, {"sub", `"acct-42"`}, {"aud", `"flashgate"`},
		{"iat", strconv.FormatInt(now, 10)}, {"exp", strconv.FormatInt(now+3600, 10)}}
	extra := []claimText{{"nbf", strconv.FormatInt(now-10, 10)}, {"jti", `"jti-1"`},
		{"sale", `"s1"`}, {"pos", "7"}, {"pre", "true"}, {"name", `"n"`}}
	for _, opts := range []tokens.UserVerifierOptions{
		{Issuer: "shop-idp", Audience: "flashgate", Clock: clock},
		{Clock: clock},
	} {
		fast, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, opts)
		if err != nil {
			t.Fatal(err)
		}
		slow := tokens.UserSlowOnly(fast)
		accepted := 0
		for _, tc := range claimTypeCases(base, extra) {
			tok := rawHS256(`{"alg":"HS256","typ":"JWT"}`, tc.payload, secret)
			desc := fmt.Sprintf("iss %q aud %q: %s", opts.Issuer, opts.Audience, tc.desc)
			if sameAccount(t, desc, fast, slow, tok) {
				accepted++
				if wantRefused(tc.claim, tc.value) {
					t.Errorf("%s: Account(%s) accepted; want a time claim that is not a number refused", desc, tc.payload)
				}
			}
		}
		if accepted == 0 {
			t.Errorf("iss %q aud %q: no case verified", opts.Issuer, opts.Audience)
		}
	}
}

// FuzzFastPathPayload signs any payload as a queue or admission token and as
// a user token: the fast paths must agree with golang-jwt on each.
func FuzzFastPathPayload(f *testing.F) {
	fx := newFixture(f)
	slow := tokens.SlowOnly(fx.ver)
	secret := tokenstest.UserSecret()
	user, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{Clock: fx.clock})
	if err != nil {
		f.Fatal(err)
	}
	userSlow := tokens.UserSlowOnly(user)
	queue, admission, extra := ourPayloads(fx.clock.Now().Unix())
	for _, base := range []payload{queue, admission} {
		for i, tc := range claimTypeCases(base, extra) {
			if i%3 == 0 { // a sample: the tests above run them all
				f.Add(tc.payload)
			}
		}
	}
	f.Fuzz(func(t *testing.T, p string) {
		diffCheck(t, fx.ver, slow, "payload", rawHS256(testHeader, p, fx.secret))
		sameAccount(t, "user payload "+p, user, userSlow, rawHS256(`{"alg":"HS256","typ":"JWT"}`, p, secret))
	})
}
