package tokens_test

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// sameAccount fails t unless the fast and slow-only user verifiers agree
// exactly: the same account, or errors with the same text, sentinels and Code.
func sameAccount(t *testing.T, desc string, fast, slow *tokens.UserVerifier, tok string) bool {
	t.Helper()
	fa, fe := fast.Account(tok)
	sa, se := slow.Account(tok)
	if fa != sa {
		t.Errorf("%s: Account = %q (fast), %q (slow)", desc, fa, sa)
	}
	sameResult(t, desc, nil, nil, fe, se)
	return fe == nil
}

// userCases are hand-built user tokens around the fast path's edges, signed
// with the right secret unless noted; now is the clock's time.
func userCases(now int64, secret []byte) map[string]string {
	hour := now + 3600
	h := `{"alg":"HS256","typ":"JWT"}`
	p := func(extra string) string {
		return fmt.Sprintf(`{"iss":"shop-idp","sub":"acct-42","aud":"flashgate","iat":%d,"exp":%d%s}`, now, hour, extra)
	}
	rep := func(old, new string) string { return strings.Replace(p(""), old, new, 1) }
	other := []byte("flashgate-other-secret-abcdefghi")
	good := rawHS256(h, p(""), secret)
	none := func(header string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(p(""))) + "."
	}
	cases := map[string]string{
		"good":                  good,
		"good extra claims":     rawHS256(h, p(`,"name":"A \"B\" é","roles":["x",{"y":[1,2.5e3,null,true]}],"email_verified":false`), secret),
		"good aud list":         rawHS256(h, rep(`"aud":"flashgate"`, `"aud":["x","flashgate"]`), secret),
		"good nbf":              rawHS256(h, p(fmt.Sprintf(`,"nbf":%d`, now-5)), secret),
		"good jti":              rawHS256(h, p(`,"jti":"abc"`), secret),
		"good whitespace":       rawHS256(h, " "+strings.ReplaceAll(p(""), ",", " ,\n")+"\t", secret),
		"good sale and pos":     rawHS256(h, p(`,"sale":5,"pos":"x","pre":"y"`), secret),
		"header no typ":         rawHS256(`{"alg":"HS256"}`, p(""), secret),
		"header kid":            rawHS256(`{"alg":"HS256","kid":"k1","typ":"JWT"}`, p(""), secret),
		"wrong secret":          rawHS256(h, p(""), other),
		"alg none":              none(`{"alg":"none","typ":"JWT"}`),
		"alg none signed":       rawHS256(`{"alg":"none","typ":"JWT"}`, p(""), secret),
		"alg HS512":             rawHS256(`{"alg":"HS512","typ":"JWT"}`, p(""), secret),
		"alg RS256":             rawHS256(`{"alg":"RS256","typ":"JWT"}`, p(""), secret),
		"alg EdDSA":             rawHS256(`{"alg":"EdDSA","typ":"JWT"}`, p(""), secret),
		"alg missing":           rawHS256(`{"typ":"JWT"}`, p(""), secret),
		"alg number":            rawHS256(`{"alg":256,"typ":"JWT"}`, p(""), secret),
		"header dup alg":        rawHS256(`{"alg":"HS256","alg":"none"}`, p(""), secret),
		"header not object":     rawHS256(`["HS256"]`, p(""), secret),
		"header junk":           rawHS256(`{"alg":"HS256"`, p(""), secret),
		"expired":               rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), fmt.Sprintf(`"exp":%d`, now-60)), secret),
		"exp in leeway":         rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), fmt.Sprintf(`"exp":%d`, now-4)), secret),
		"exp at leeway":         rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), fmt.Sprintf(`"exp":%d`, now-5)), secret),
		"no exp":                rawHS256(h, rep(fmt.Sprintf(`,"exp":%d`, hour), ""), secret),
		"exp float":             rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), fmt.Sprintf(`"exp":%d.5`, hour)), secret),
		"exp string":            rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), `"exp":"9999999999"`), secret),
		"exp null":              rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), `"exp":null`), secret),
		"EXP":                   rawHS256(h, rep(fmt.Sprintf(`"exp":%d`, hour), fmt.Sprintf(`"EXP":%d`, hour)), secret),
		"iat future":            rawHS256(h, rep(fmt.Sprintf(`"iat":%d`, now), fmt.Sprintf(`"iat":%d`, now+60)), secret),
		"iat in leeway":         rawHS256(h, rep(fmt.Sprintf(`"iat":%d`, now), fmt.Sprintf(`"iat":%d`, now+5)), secret),
		"nbf future":            rawHS256(h, p(fmt.Sprintf(`,"nbf":%d`, now+60)), secret),
		"wrong iss":             rawHS256(h, rep(`"iss":"shop-idp"`, `"iss":"evil"`), secret),
		"no iss":                rawHS256(h, rep(`"iss":"shop-idp",`, ""), secret),
		"iss number":            rawHS256(h, rep(`"iss":"shop-idp"`, `"iss":1`), secret),
		"wrong aud":             rawHS256(h, rep(`"aud":"flashgate"`, `"aud":"edge"`), secret),
		"no aud":                rawHS256(h, rep(`"aud":"flashgate",`, ""), secret),
		"aud empty":             rawHS256(h, rep(`"aud":"flashgate"`, `"aud":""`), secret),
		"aud empty list":        rawHS256(h, rep(`"aud":"flashgate"`, `"aud":[]`), secret),
		"aud number":            rawHS256(h, rep(`"aud":"flashgate"`, `"aud":7`), secret),
		"aud number in list":    rawHS256(h, rep(`"aud":"flashgate"`, `"aud":["flashgate",7]`), secret),
		"no sub":                rawHS256(h, rep(`"sub":"acct-42",`, ""), secret),
		"sub empty":             rawHS256(h, rep(`"sub":"acct-42"`, `"sub":""`), secret),
		"sub number":            rawHS256(h, rep(`"sub":"acct-42"`, `"sub":42`), secret),
		"sub escaped":           rawHS256(h, rep(`"sub":"acct-42"`, `"sub":"acct\u002d42"`), secret),
		"sub twice":             rawHS256(h, p(`,"sub":"acct-1"`), secret),
		"Sub":                   rawHS256(h, p(`,"Sub":"acct-1"`), secret),
		"payload trailing junk": rawHS256(h, p("")+"x", secret),
		"payload two objects":   rawHS256(h, p("")+"{}", secret),
		"payload array":         rawHS256(h, "[1]", secret),
		"payload empty":         rawHS256(h, "", secret),
		"newline in payload":    strings.Replace(good, ".", ".\n", 1),
		"sig padded":            good + "=",
		"sig cut":               good[:len(good)-1],
		"two segments":          good[:strings.LastIndex(good, ".")],
		"four segments":         good + ".x",
		"spaces":                " " + good,
		"empty":                 "",
		"oversized":             rawHS256(h, p(`,"x":"`+strings.Repeat("a", 9000)+`"`), secret),
	}
	last := good[len(good)-1]
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	cases["sig trailing bits"] = good[:len(good)-1] + string(b64[strings.IndexByte(b64, last)^1])
	return cases
}

func TestUserFastPathMatchesSlow(t *testing.T) {
	clock := clock.NewFake(tokenstest.Start())
	secret := tokenstest.UserSecret()
	for _, opts := range []tokens.UserVerifierOptions{
		{Issuer: "shop-idp", Audience: "flashgate", Clock: clock},
		{Issuer: "shop-idp", Clock: clock},
		{Audience: "flashgate", Clock: clock},
		{Clock: clock, Leeway: -1},
	} {
		fast, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, opts)
		if err != nil {
			t.Fatal(err)
		}
		slow := tokens.UserSlowOnly(fast)
		ok := 0
		cases := userCases(clock.Now().Unix(), secret)
		for round := range 2 { // the second round runs with the headers learned in the first
			for name, tok := range cases {
				if sameAccount(t, fmt.Sprintf("iss %q aud %q round %d: %s", opts.Issuer, opts.Audience, round, name), fast, slow, tok) {
					ok++
				}
			}
		}
		if ok == 0 {
			t.Errorf("iss %q aud %q: no case verified", opts.Issuer, opts.Audience)
		}
	}
}

// TestUserFastPathMatchesSlowMutations compares the paths on seeded random
// mutations of good and bad tokens.
func TestUserFastPathMatchesSlowMutations(t *testing.T) {
	clock := clock.NewFake(tokenstest.Start())
	secret := tokenstest.UserSecret()
	fast, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret},
		tokens.UserVerifierOptions{Issuer: "shop-idp", Audience: "flashgate", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	slow := tokens.UserSlowOnly(fast)
	var seeds []string
	for _, tok := range userCases(clock.Now().Unix(), secret) {
		if len(tok) < 1000 {
			seeds = append(seeds, tok)
			_, _ = fast.Account(tok) // learn the headers the slow path accepts
		}
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \n\x00"
	rng := rand.New(rand.NewSource(3))
	n := 3000
	if testing.Short() {
		n = 500
	}
	for i := range n {
		b := []byte(seeds[rng.Intn(len(seeds))])
		for range 1 + rng.Intn(3) {
			if len(b) == 0 {
				break
			}
			p := rng.Intn(len(b))
			switch rng.Intn(5) {
			case 0:
				b[p] = alphabet[rng.Intn(len(alphabet))]
			case 1:
				b[p] ^= 1 << rng.Intn(8)
			case 2:
				b = b[:p]
			case 3:
				b = append(b[:p], b[p+1:]...)
			case 4:
				b = append(b[:p], append([]byte{alphabet[rng.Intn(len(alphabet))]}, b[p:]...)...)
			}
		}
		sameAccount(t, fmt.Sprintf("mutation %d", i), fast, slow, string(b))
	}
	// Time boundaries of a real token.
	tok := sign(t, jwt.SigningMethodHS256, nil, jwt.MapClaims{"iss": "shop-idp", "aud": "flashgate", "sub": "a",
		"iat": clock.Now().Add(10 * time.Second).Unix(), "exp": clock.Now().Add(10*time.Second + time.Minute).Unix()}, secret)
	for range 120 {
		sameAccount(t, "clock "+clock.Now().String(), fast, slow, tok)
		clock.Advance(time.Second / 2)
	}
}

// TestUserFastPathHeaders checks which header segments the fast path trusts:
// golang-jwt's own from the start, another only once a token carrying it has
// passed the slow path, never one the slow path refuses, and at most a few.
func TestUserFastPathHeaders(t *testing.T) {
	clock := clock.NewFake(tokenstest.Start())
	secret := tokenstest.UserSecret()
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	seg := func(h string) string { return base64.RawURLEncoding.EncodeToString([]byte(h)) }
	if got := tokens.UserHeaders(v); len(got) != 1 || got[0] != seg(`{"alg":"HS256","typ":"JWT"}`) {
		t.Fatalf("UserHeaders at the start = %q, want golang-jwt's HS256 header only", got)
	}
	payload := fmt.Sprintf(`{"sub":"a","exp":%d}`, clock.Now().Add(time.Hour).Unix())
	other := []byte("flashgate-other-secret-abcdefghi")
	refused := []string{
		rawHS256(`{"alg":"HS256","kid":"forged"}`, payload, other),
		rawHS256(`{"alg":"none","kid":"x"}`, payload, secret),
		rawHS256(`{"alg":"HS384"}`, payload, secret),
		rawHS256(`{"alg":"HS256","kid":"expired"}`, fmt.Sprintf(`{"sub":"a","exp":%d}`, clock.Now().Add(-time.Hour).Unix()), secret),
	}
	for _, tok := range refused {
		if _, err := v.Account(tok); err == nil {
			t.Fatalf("Account(%q) err = nil, want an error", tok)
		}
	}
	if got := tokens.UserHeaders(v); len(got) != 1 {
		t.Errorf("UserHeaders after refused tokens = %q, want only the first", got)
	}
	for i := range 20 {
		tok := rawHS256(fmt.Sprintf(`{"alg":"HS256","kid":"k%d"}`, i), payload, secret)
		if a, err := v.Account(tok); err != nil || a != "a" {
			t.Fatalf("Account(kid k%d) = %q, %v; want a, nil", i, a, err)
		}
	}
	got := tokens.UserHeaders(v)
	if len(got) != 8 || got[1] != seg(`{"alg":"HS256","kid":"k0"}`) {
		t.Errorf("UserHeaders after 20 good headers = %d of them starting %q, want 8 with k0 second", len(got), got[:2])
	}
}

func TestUserFastPathConcurrent(t *testing.T) {
	secret := tokenstest.UserSecret()
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				want := fmt.Sprintf("acct-%d-%d", g, i)
				tok := rawHS256(fmt.Sprintf(`{"alg":"HS256","kid":"k%d"}`, i%10), fmt.Sprintf(`{"sub":%q,"exp":%d}`, want, exp), secret)
				if got, err := v.Account(tok); err != nil || got != want {
					t.Errorf("Account = %q, %v; want %q", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestUserFastPathUsed guards against the fast path silently never running.
func TestUserFastPathUsed(t *testing.T) {
	secret := tokenstest.UserSecret()
	v, err := tokens.NewUserVerifier(tokens.UserKey{HMACSecret: secret}, tokens.UserVerifierOptions{Issuer: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.NewDevUserIssuer(secret, "shop", time.Hour, nil).Issue("user-300012345")
	if err != nil {
		t.Fatal(err)
	}
	slow := tokens.UserSlowOnly(v)
	fastAllocs := testing.AllocsPerRun(50, func() { _, _ = v.Account(tok) })
	slowAllocs := testing.AllocsPerRun(50, func() { _, _ = slow.Account(tok) })
	if fastAllocs > slowAllocs/4 {
		t.Errorf("Account allocs: fast path %v, slow only %v; want the fast path far under", fastAllocs, slowAllocs)
	}
}
