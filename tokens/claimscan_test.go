package tokens

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// scanSeeds are claim objects around the scanner's edges: accepted ones and
// ones it must leave to encoding/json.
var scanSeeds = []string{
	`{"iss":"flashgate","sub":"a","aud":["edge"],"exp":1893499200,"iat":1893495600,"sale":"s1","pos":3}`,
	`{"iss":"flashgate","sub":"a","aud":["origin"],"exp":1893499200,"iat":1893495600,"jti":"j1","sale":"s1","pos":3}`,
	`{"sub":"a","exp":1893499200,"pre":true,"nbf":0}`,
	`{"sub":"a","exp":1893499200,"pre":false}`,
	` { "sub" : "a" ,	"exp":1893499200 , "aud" : [ "x" , "edge" ] }` + "\r\n",
	`{}`,
	`{"aud":"edge"}`,
	`{"aud":[]}`,
	`{"aud":[""]}`,
	`{"aud":null}`,
	`{"aud":[1]}`,
	`{"aud":["a",]}`,
	`{"sub":null}`,
	`{"sub":"a\"b"}`,
	`{"sub":"\u0061"}`,
	`{"sub":"é"}`,
	"{\"sub\":\"a\xff\"}",
	"{\"sub\":\"a\tb\"}",
	`{"sub":"a","sub":"b"}`,
	`{"SUB":"a"}`,
	`{"Sale":"s2"}`,
	`{"ſub":"a"}`,
	`{"su\u0062":"a"}`,
	`{"exp":01}`,
	`{"exp":-1}`,
	`{"exp":1.5}`,
	`{"exp":1e3}`,
	`{"exp":1E3}`,
	`{"exp":"1"}`,
	`{"exp":"1893499200"}`,
	`{"nbf":null}`,
	`{"iat":true}`,
	`{"exp":[1893499200]}`,
	`{"exp":{}}`,
	`{"exp":1e300}`,
	`{"iat":99999999999999999999}`,
	`{"EXP":"1893499200"}`,
	`{"exp":1234567890123456}`,
	`{"exp":123456789012345}`,
	`{"pos":0}`,
	`{"pos":-0}`,
	`{"pre":1}`,
	`{"pre":True}`,
	`{"x":{"a":[1,-2.5e+3,true,false,null,"\n\u00e9\\"],"b":{}},"sub":"a"}`,
	`{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"x":[[[]]],"y":[],"z":{}}`,
	`{"x":"\uZZZZ"}`,
	`{"x":"\x"}`,
	`{"x":01}`,
	`{"x":-}`,
	`{"x":1.}`,
	`{"x":.5}`,
	`{"x":1e}`,
	`{"x":tru}`,
	`{"x":nul}`,
	`{"x":[1 2]}`,
	`{"x":{"a" 1}}`,
	`{"x":{"a":1,}}`,
	`{"x":{1:1}}`,
	`{"x":"é"}`,
	"{\"x\":\"\xff\"}",
	`{"x":1}x`,
	`{"x":1} `,
	`{"x":1}{}`,
	`{,}`,
	`{"x":1,}`,
	`{"x"}`,
	`[]`,
	`null`,
	`"s"`,
	``,
	`{`,
	`{"sub":"a"`,
}

// jsonClaims decodes p into each claims type as the slow paths have
// golang-jwt decode it (encoding/json, time claims checked).
func jsonClaims(p string) (q QueueClaims, qerr error, a AdmissionClaims, aerr error, r jwt.RegisteredClaims, rerr error) {
	var qj queueClaimsJSON
	var aj admissionClaimsJSON
	var rj userClaimsJSON
	qerr = json.Unmarshal([]byte(p), &qj)
	aerr = json.Unmarshal([]byte(p), &aj)
	rerr = json.Unmarshal([]byte(p), &rj)
	return qj.QueueClaims, qerr, aj.AdmissionClaims, aerr, rj.RegisteredClaims, rerr
}

// checkScan fails t if claimScan accepts p for a claims type that encoding/json
// rejects or decodes differently.
func checkScan(t *testing.T, p string) (accepted int) {
	t.Helper()
	q, qerr, a, aerr, r, rerr := jsonClaims(p)
	var fc flatClaims
	if claimScan(p, queueFields, &fc) {
		accepted++
		got := QueueClaims{RegisteredClaims: fc.registered(), Sale: fc.sale, Pos: fc.pos, Pre: fc.pre}
		if qerr != nil || !reflect.DeepEqual(got, q) {
			t.Errorf("claimScan(%q, queue) = %+v; encoding/json %+v, %v", p, got, q, qerr)
		}
	}
	fc = flatClaims{}
	if claimScan(p, admissionFields, &fc) {
		accepted++
		got := AdmissionClaims{RegisteredClaims: fc.registered(), Sale: fc.sale, Pos: fc.pos}
		if aerr != nil || !reflect.DeepEqual(got, a) {
			t.Errorf("claimScan(%q, admission) = %+v; encoding/json %+v, %v", p, got, a, aerr)
		}
	}
	fc = flatClaims{}
	if claimScan(p, registeredFields, &fc) {
		accepted++
		got := fc.registered()
		if rerr != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("claimScan(%q, registered) = %+v; encoding/json %+v, %v", p, got, r, rerr)
		}
	}
	return accepted
}

func TestClaimScanAgreesWithJSON(t *testing.T) {
	accepted := 0
	for _, p := range scanSeeds {
		accepted += checkScan(t, p)
	}
	if accepted < 10 {
		t.Errorf("claimScan accepted %d seed decodings, want most of the valid ones", accepted)
	}
	// Seeded random mutations of the seeds.
	const alphabet = "{}[]:,\"\\ \t\n0123456789.-+eEtrufalsn xabdpiojcsu"
	rng := rand.New(rand.NewSource(2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		b := []byte(scanSeeds[rng.Intn(len(scanSeeds))])
		for range 1 + rng.Intn(3) {
			if len(b) == 0 {
				b = append(b, alphabet[rng.Intn(len(alphabet))])
				continue
			}
			p := rng.Intn(len(b))
			switch rng.Intn(4) {
			case 0:
				b[p] = alphabet[rng.Intn(len(alphabet))]
			case 1:
				b = b[:p]
			case 2:
				b = append(b[:p], b[p+1:]...)
			case 3:
				b = append(b[:p], append([]byte{alphabet[rng.Intn(len(alphabet))]}, b[p:]...)...)
			}
		}
		checkScan(t, string(b))
	}
}

// TestClaimScanRejects lists inputs the scanner must leave to the slow path
// even though encoding/json may accept them, because their meaning there is
// not the obvious one.
func TestClaimScanRejects(t *testing.T) {
	for _, p := range []string{
		`{"sub":"a","sub":"b"}`,    // last wins in encoding/json
		`{"SUB":"a"}`,              // case-insensitive match
		`{"ſub":"a"}`,              // Unicode folding to "sub"
		`{"su\u0062":"a"}`,         // escaped key
		`{"sub":"\u0061"}`,         // escaped value
		"{\"sub\":\"a\xff\"}",      // invalid UTF-8, replaced by encoding/json
		`{"aud":[]}`,               // decodes to nil
		`{"aud":null}`,             // left unset
		`{"exp":1.5}`,              // fraction
		`{"exp":1234567890123456}`, // beyond the exact range kept
		`{"pos":-1}`,
		strings.Repeat(`{"x":`, 40) + "1" + strings.Repeat("}", 40),
	} {
		var fc flatClaims
		if claimScan(p, queueFields, &fc) {
			t.Errorf("claimScan(%q) = true, want false", p)
		}
	}
}

func FuzzClaimScan(f *testing.F) {
	for _, p := range scanSeeds {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) { checkScan(t, p) })
}
