package tokens_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// rawHS256 builds a compact JWT from raw header and payload JSON text, signed
// with HMAC-SHA256 under secret, so that cases can control every byte.
func rawHS256(header, payload string, secret []byte) string {
	signing := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sentinels are the errors verification may wrap.
var sentinels = []error{tokens.ErrMissing, tokens.ErrMalformed, tokens.ErrExpired, tokens.ErrInvalid, tokens.ErrWrongSale}

// sameResult fails t unless the fast-path and slow-only results agree exactly:
// equal claims, or errors with the same text, sentinels and Code.
func sameResult(t *testing.T, desc string, fastC, slowC any, fastErr, slowErr error) {
	t.Helper()
	if !reflect.DeepEqual(fastC, slowC) {
		t.Errorf("%s: claims differ:\nfast %+v\nslow %+v", desc, fastC, slowC)
	}
	if (fastErr == nil) != (slowErr == nil) {
		t.Errorf("%s: fast err = %v, slow err = %v", desc, fastErr, slowErr)
		return
	}
	if fastErr == nil {
		return
	}
	if fastErr.Error() != slowErr.Error() || tokens.Code(fastErr) != tokens.Code(slowErr) {
		t.Errorf("%s: fast err = %v (%s), slow err = %v (%s)", desc, fastErr, tokens.Code(fastErr), slowErr, tokens.Code(slowErr))
	}
	for _, s := range sentinels {
		if errors.Is(fastErr, s) != errors.Is(slowErr, s) {
			t.Errorf("%s: errors.Is(_, %v): fast %v, slow %v", desc, s, errors.Is(fastErr, s), errors.Is(slowErr, s))
		}
	}
}

// diffCheck verifies tok as both kinds for sales s1 and s2 with the fast path
// enabled and disabled, and reports how many fast-enabled calls succeeded.
func diffCheck(t *testing.T, ver, slow *tokens.Verifier, desc, tok string) (ok int) {
	t.Helper()
	for _, sale := range []string{"s1", "s2"} {
		fq, fqe := ver.Queue(tok, sale)
		sq, sqe := slow.Queue(tok, sale)
		sameResult(t, fmt.Sprintf("%s: Queue(%q, %s)", desc, tok, sale), fq, sq, fqe, sqe)
		fa, fae := ver.Admission(tok, sale)
		sa, sae := slow.Admission(tok, sale)
		sameResult(t, fmt.Sprintf("%s: Admission(%q, %s)", desc, tok, sale), fa, sa, fae, sae)
		if fqe == nil {
			ok++
		}
		if fae == nil {
			ok++
		}
	}
	return ok
}

const testHeader = `{"alg":"HS256","kid":"test1","typ":"JWT"}`

// fastCases are hand-built tokens around the fast path's edges, all signed
// with the right key unless noted; now is the fixture clock's time.
func fastCases(t *testing.T, f *fixture) map[string]string {
	now := f.clock.Now().Unix()
	hour := now + 3600
	q := func(extra string) string {
		return fmt.Sprintf(`{"iss":"flashgate","sub":"a","aud":["edge"],"iat":%d,"exp":%d,"sale":"s1","pos":3%s}`, now, hour, extra)
	}
	a := func(extra string) string {
		return fmt.Sprintf(`{"iss":"flashgate","sub":"a","aud":["origin"],"iat":%d,"exp":%d,"jti":"j1","sale":"s1","pos":3%s}`, now, hour, extra)
	}
	other := []byte("flashgate-other-secret-abcdefghi")
	qTok, _, err := f.iss.Queue("s1", "a", 1, true, f.clock.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	aTok, _, err := f.iss.Admission("s1", "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	h, s := testHeader, f.secret
	cases := map[string]string{
		"issued queue":           qTok,
		"issued admission":       aTok,
		"hand queue":             rawHS256(h, q(""), s),
		"hand admission":         rawHS256(h, a(""), s),
		"wrong key":              rawHS256(h, q(""), other),
		"other kid header":       rawHS256(`{"alg":"HS256","kid":"other1","typ":"JWT"}`, q(""), other),
		"no kid":                 rawHS256(`{"alg":"HS256","typ":"JWT"}`, q(""), s),
		"empty kid":              rawHS256(`{"alg":"HS256","kid":"","typ":"JWT"}`, q(""), s),
		"alg none":               base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"test1","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(q(""))) + ".",
		"alg HS512 header":       rawHS256(`{"alg":"HS512","kid":"test1","typ":"JWT"}`, q(""), s),
		"header reordered":       rawHS256(`{"typ":"JWT","kid":"test1","alg":"HS256"}`, q(""), s),
		"header spaces":          rawHS256(`{"alg": "HS256", "kid": "test1", "typ": "JWT"}`, q(""), s),
		"header extra field":     rawHS256(`{"alg":"HS256","kid":"test1","typ":"JWT","x":1}`, q(""), s),
		"header dup alg":         rawHS256(`{"alg":"none","alg":"HS256","kid":"test1","typ":"JWT"}`, q(""), s),
		"payload spaces":         rawHS256(h, strings.ReplaceAll(q(""), ",", " ,\n\t"), s),
		"payload trailing":       rawHS256(h, q("")+" ", s),
		"payload trailing junk":  rawHS256(h, q("")+"x", s),
		"payload two values":     rawHS256(h, q("")+"{}", s),
		"payload null":           rawHS256(h, "null", s),
		"payload array":          rawHS256(h, "[1]", s),
		"payload empty":          rawHS256(h, "", s),
		"dup sale":               rawHS256(h, q(`,"sale":"s2"`), s),
		"dup aud":                rawHS256(h, q(`,"aud":["origin"]`), s),
		"dup exp past":           rawHS256(h, q(fmt.Sprintf(`,"exp":%d`, now-3600)), s),
		"dup iss":                rawHS256(h, q(`,"iss":"evil"`), s),
		"dup sub empty":          rawHS256(h, q(`,"sub":""`), s),
		"dup jti empty":          rawHS256(h, a(`,"jti":""`), s),
		"aud string":             rawHS256(h, strings.Replace(q(""), `["edge"]`, `"edge"`, 1), s),
		"aud both":               rawHS256(h, strings.Replace(q(""), `["edge"]`, `["x","edge","origin"]`, 1), s),
		"aud empty":              rawHS256(h, strings.Replace(q(""), `["edge"]`, `[]`, 1), s),
		"aud empty string":       rawHS256(h, strings.Replace(q(""), `["edge"]`, `""`, 1), s),
		"aud number":             rawHS256(h, strings.Replace(q(""), `["edge"]`, `[1]`, 1), s),
		"aud null":               rawHS256(h, strings.Replace(q(""), `["edge"]`, `null`, 1), s),
		"no exp":                 rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), "", 1), s),
		"exp null":               rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), `"exp":null,`, 1), s),
		"exp string":             rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), `"exp":"9999999999",`, 1), s),
		"exp float":              rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), fmt.Sprintf(`"exp":%d.75,`, hour), 1), s),
		"exp huge":               rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), `"exp":1e300,`, 1), s),
		"exp negative huge":      rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), `"exp":-1e300,`, 1), s),
		"exp now":                rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), fmt.Sprintf(`"exp":%d,`, now), 1), s),
		"exp in leeway":          rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), fmt.Sprintf(`"exp":%d,`, now-4), 1), s),
		"exp at leeway":          rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), fmt.Sprintf(`"exp":%d,`, now-5), 1), s),
		"exp past":               rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"exp":%d,`, hour), fmt.Sprintf(`"exp":%d,`, now-60), 1), s),
		"iat future in leeway":   rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"iat":%d,`, now), fmt.Sprintf(`"iat":%d,`, now+5), 1), s),
		"iat future":             rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"iat":%d,`, now), fmt.Sprintf(`"iat":%d,`, now+6), 1), s),
		"no iat":                 rawHS256(h, strings.Replace(q(""), fmt.Sprintf(`"iat":%d,`, now), "", 1), s),
		"nbf past":               rawHS256(h, q(fmt.Sprintf(`,"nbf":%d`, now-10)), s),
		"nbf future in leeway":   rawHS256(h, q(fmt.Sprintf(`,"nbf":%d`, now+5)), s),
		"nbf future":             rawHS256(h, q(fmt.Sprintf(`,"nbf":%d`, now+60)), s),
		"nbf string":             rawHS256(h, q(`,"nbf":"x"`), s),
		"no iss":                 rawHS256(h, strings.Replace(q(""), `"iss":"flashgate",`, "", 1), s),
		"iss case":               rawHS256(h, strings.Replace(q(""), `"iss":"flashgate"`, `"iss":"Flashgate"`, 1), s),
		"key case":               rawHS256(h, strings.Replace(q(""), `"sale":"s1"`, `"SALE":"s2"`, 1), s),
		"no sub":                 rawHS256(h, strings.Replace(q(""), `"sub":"a",`, "", 1), s),
		"no jti":                 rawHS256(h, strings.Replace(a(""), `"jti":"j1",`, "", 1), s),
		"no sale":                rawHS256(h, strings.Replace(q(""), `"sale":"s1",`, "", 1), s),
		"unknown field":          rawHS256(h, q(`,"zzz":{"a":[1,2]}`), s),
		"pos string":             rawHS256(h, q(`,"pos":"3"`), s),
		"pos float":              rawHS256(h, q(`,"pos":3.5`), s),
		"pre string":             rawHS256(h, q(`,"pre":"true"`), s),
		"invalid utf8":           rawHS256(h, strings.Replace(q(""), `"sub":"a"`, "\"sub\":\"a\xff\"", 1), s),
		"escaped sub":            rawHS256(h, strings.Replace(q(""), `"sub":"a"`, `"sub":"\u0061"`, 1), s),
		"sig padded":             qTok + "=",
		"sig newline":            qTok[:len(qTok)-5] + "\n" + qTok[len(qTok)-5:],
		"payload newline":        strings.Replace(qTok, ".", ".\n", 1),
		"four segments":          qTok + ".x",
		"two segments":           qTok[:strings.LastIndex(qTok, ".")],
		"leading space":          " " + qTok,
		"trailing space":         qTok + " ",
		"empty":                  "",
		"dots":                   "..",
		"oversized":              qTok + strings.Repeat("A", 9000),
		"signature of admission": qTok[:strings.LastIndex(qTok, ".")] + aTok[strings.LastIndex(aTok, "."):],
	}
	// Non-canonical trailing bits in the signature (rejected by strict decoding).
	last := qTok[len(qTok)-1]
	alt := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", last) ^ 1
	cases["sig trailing bits"] = qTok[:len(qTok)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[alt])
	return cases
}

func TestFastPathMatchesSlow(t *testing.T) {
	f := newFixture(t)
	slow := tokens.SlowOnly(f.ver)
	ok := 0
	for name, tok := range fastCases(t, f) {
		ok += diffCheck(t, f.ver, slow, name, tok)
	}
	if ok == 0 {
		t.Fatal("no case verified")
	}
}

// TestFastPathMatchesSlowClock checks issued tokens on both sides of every
// time boundary.
func TestFastPathMatchesSlowClock(t *testing.T) {
	f := newFixture(t)
	slow := tokens.SlowOnly(f.ver)
	// Issued 10s ahead of the clock: iat in the future, then within leeway.
	ahead := tokens.NewIssuer(f.keys, tokens.IssuerOptions{Clock: clock.NewFake(f.clock.Now().Add(10 * time.Second))})
	qTok, _, _ := ahead.Queue("s1", "a", 1, false, f.clock.Now().Add(10*time.Second+time.Minute))
	aTok, _, _ := ahead.Admission("s1", "a", 1)
	for range 40 {
		diffCheck(t, f.ver, slow, "queue", qTok)
		diffCheck(t, f.ver, slow, "admission", aTok)
		f.clock.Advance(500 * time.Millisecond)
	}
	f.clock.Advance(time.Minute - 12*time.Second) // up to and past exp+leeway
	for range 40 {
		diffCheck(t, f.ver, slow, "queue", qTok)
		f.clock.Advance(250 * time.Millisecond)
	}
	f.clock.Advance(tokens.DefaultAdmissionTTL - 90*time.Second)
	for range 40 {
		diffCheck(t, f.ver, slow, "admission", aTok)
		f.clock.Advance(250 * time.Millisecond)
	}
}

// TestFastPathMatchesSlowMutations compares the paths on thousands of seeded
// random mutations of valid tokens.
func TestFastPathMatchesSlowMutations(t *testing.T) {
	f := newFixture(t)
	slow := tokens.SlowOnly(f.ver)
	var seeds []string
	for _, tok := range fastCases(t, f) {
		if len(tok) < 1000 {
			seeds = append(seeds, tok)
		}
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \n\x00"
	rng := rand.New(rand.NewSource(1))
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
			case 0: // replace a character
				b[p] = alphabet[rng.Intn(len(alphabet))]
			case 1: // flip a bit
				b[p] ^= 1 << rng.Intn(8)
			case 2: // truncate
				b = b[:p]
			case 3: // delete a character
				b = append(b[:p], b[p+1:]...)
			case 4: // insert a character
				b = append(b[:p], append([]byte{alphabet[rng.Intn(len(alphabet))]}, b[p:]...)...)
			}
		}
		diffCheck(t, f.ver, slow, fmt.Sprintf("mutation %d", i), string(b))
	}
}

// TestFastPathUsed guards against the fast path silently never running.
func TestFastPathUsed(t *testing.T) {
	keys := tokenstest.KeySet()
	tok, _, err := tokens.NewIssuer(keys, tokens.IssuerOptions{}).Queue("s1", "a", 1, false, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ver := tokens.NewVerifier(keys, tokens.VerifierOptions{})
	slowVer := tokens.SlowOnly(ver)
	fast := testing.AllocsPerRun(50, func() { _, _ = ver.Queue(tok, "s1") })
	slow := testing.AllocsPerRun(50, func() { _, _ = slowVer.Queue(tok, "s1") })
	// Loose, since the race detector makes sync.Pool drop items: about 5 v 61.
	if fast > slow/4 {
		t.Errorf("Queue allocs: fast path %v, slow only %v; want the fast path well under", fast, slow)
	}
}

// TestIssuerFastMatchesJWT checks that the Issuer's own claim writer signs
// exactly the bytes golang-jwt would, for plain and awkward values (those
// golang-jwt must then sign itself).
func TestIssuerFastMatchesJWT(t *testing.T) {
	f := newFixture(t)
	slowIss := tokens.SlowIssuer(f.iss)
	strs := []string{"s1", "acct-1", "user-300012345", "a", "a b", `a"b`, `a\b`, "a<b", "a>b", "a&b", "é", "a\x00", "a\x7f",
		"~!#$%'()*+,-./:;=?@[]^_`{|}", strings.Repeat("x", 300)}
	poss := []int64{0, 1, 42, 1 << 40, 1<<63 - 1}
	n := 0
	for _, sale := range strs {
		for _, acct := range strs {
			pos := poss[n%len(poss)]
			pre := n%2 == 0
			n++
			exp := f.clock.Now().Add(time.Duration(n)*time.Hour + 750*time.Millisecond)
			fastTok, fastC, fastErr := f.iss.Queue(sale, acct, pos, pre, exp)
			slowTok, slowC, slowErr := slowIss.Queue(sale, acct, pos, pre, exp)
			if fastTok != slowTok || !reflect.DeepEqual(fastC, slowC) || (fastErr == nil) != (slowErr == nil) {
				t.Errorf("Queue(%.20q, %.20q, %d, %v) = %.60q, %v; golang-jwt %.60q, %v", sale, acct, pos, pre, fastTok, fastErr, slowTok, slowErr)
			}
			aTok, aC, err := f.iss.Admission(sale, acct, pos)
			if err != nil {
				t.Fatalf("Admission(%q, %q, %d) err = %v", sale, acct, pos, err)
			}
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, &aC)
			tok.Header["kid"] = tokenstest.KID
			want, err := tok.SignedString(f.secret)
			if err != nil {
				t.Fatal(err)
			}
			if aTok != want {
				t.Errorf("Admission(%.20q, %.20q, %d) = %.60q; golang-jwt signs its claims as %.60q", sale, acct, pos, aTok, want)
			}
			got, err := f.ver.Admission(aTok, sale)
			if err != nil || got.Subject != acct || got.Sale != sale || got.Pos != pos || got.ID != aC.ID || !got.ExpiresAt.Equal(aC.ExpiresAt.Time) {
				t.Errorf("Verifier.Admission(Issuer.Admission(%.20q, %.20q, %d)) = %.80v, %v; want the issued claims", sale, acct, pos, got, err)
			}
		}
	}
}
