package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// adminChangeReply is one admin change as the origin answers it.
type adminChangeReply struct {
	ID     int64           `json:"id"`
	Actor  string          `json:"actor"`
	What   string          `json:"what"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	Error  string          `json:"error"`
}

// The admin changes an edge records are kept with who, what, before and
// after, and read back newest first, both through signed requests: an
// unsigned or replayed one is 401, and a bad body 400 with its code, never
// 5xx, and keeps nothing.
func TestAdminChangesKept(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	const path = "/v1/admin-changes"
	call := func(signer *tokens.RequestSigner, method, body string) (int, []byte) {
		t.Helper()
		r := origintest.Request{Method: method, Path: path, Header: map[string]string{}}
		if body != "" {
			r.Body = []byte(body)
		}
		if signer != nil {
			r.Header[tokens.RequestSignatureHeader] = signer.Sign(method, path, r.Body)
		}
		return o.Do(t, r)
	}
	list := func() []adminChangeReply {
		t.Helper()
		status, body := call(sign, "GET", "")
		var got struct {
			Changes []adminChangeReply `json:"changes"`
		}
		if err := json.Unmarshal(body, &got); status != 200 || err != nil || got.Changes == nil {
			t.Fatalf("GET %s = %d %s (%v), want 200 with a list", path, status, body, err)
		}
		return got.Changes
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("changes before any = %+v, want none", got)
	}

	actor := "admin token 3f9a1c2b from 10.0.0.7 (priya)"
	status, body := call(sign, "POST", `{"actor":"`+actor+`","what":"defences","before":{"version":1},"after":{"version":2}}`)
	var kept adminChangeReply
	if err := json.Unmarshal(body, &kept); status != 200 || err != nil || kept.ID == 0 || kept.What != "defences" {
		t.Fatalf("POST defences change = %d %s (%v), want 200 with the change as kept", status, body, err)
	}
	if status, body := call(sign, "POST", `{"actor":"`+actor+`","what":"tarpit_release","before":{"account":"mallory"},"after":null}`); status != 200 {
		t.Fatalf("POST tarpit release = %d %s, want 200", status, body)
	}

	for _, bad := range []struct{ body, code string }{
		{`{"what":"defences","before":{},"after":{}}`, "invalid_actor"},
		{`{"actor":"bad\u0007actor","what":"defences"}`, "invalid_actor"},
		{`{"actor":"` + strings.Repeat("a", 201) + `","what":"defences"}`, "invalid_actor"},
		{`{"actor":"a"}`, "invalid_what"},
		{`{"actor":"a","what":"drop table"}`, "invalid_what"},
		{`{"actor":"a","what":"defences","before":[1,2]}`, "invalid_before_after"},
		{`{"actor":"a","what":"defences","after":"on"}`, "invalid_before_after"},
		{`{"actor":"a","what":"defences","after":{"a":"\u0000"}}`, "invalid_before_after"},
		{`{"actor":"a","what":"defences","after":{"n":1e1000000}}`, "invalid_before_after"},
		{`{"actor":"a","what":"defences","sale":"s1"}`, "unknown_field"},
		{`{"actor":"a","what":`, "invalid_json"},
		{`[]`, "invalid_field"},
	} {
		status, body := call(sign, "POST", bad.body)
		if status != 400 || origintest.ErrorCode(body) != bad.code {
			t.Errorf("POST %s = %d %s, want 400 %s", bad.body, status, body, bad.code)
		}
	}
	for _, method := range []string{"GET", "POST"} {
		if status, body := call(nil, method, `{"actor":"a","what":"defences"}`); status != 401 {
			t.Errorf("%s %s unsigned = %d %s, want 401", method, path, status, body)
		}
	}
	replayed := origintest.Request{Method: "POST", Path: path, Body: []byte(`{"actor":"a","what":"defences"}`), Header: map[string]string{}}
	replayed.Header[tokens.RequestSignatureHeader] = sign.Sign("POST", path, replayed.Body)
	if status, body := o.Do(t, replayed); status != 200 {
		t.Fatalf("POST once = %d %s", status, body)
	}
	if status, body := o.Do(t, replayed); status != 401 || origintest.ErrorCode(body) != "replayed_request" {
		t.Errorf("the same signed POST again = %d %s, want 401 replayed_request", status, body)
	}

	got := list()
	if len(got) != 3 {
		t.Fatalf("changes = %+v, want the 3 taken, none of the refused", got)
	}
	again, release, defences := got[0], got[1], got[2]
	if defences.ID != kept.ID || defences.Actor != actor || string(defences.Before) != `{"version":1}` || string(defences.After) != `{"version":2}` {
		t.Errorf("defences change = %+v (before %s, after %s)", defences, defences.Before, defences.After)
	}
	if release.What != "tarpit_release" || string(release.Before) != `{"account":"mallory"}` || string(release.After) != "null" || release.ID <= defences.ID {
		t.Errorf("release = %+v (before %s, after %s), want mallory before, null after, newer", release, release.Before, release.After)
	}
	if again.What != "defences" || string(again.Before) != "null" || again.ID <= release.ID {
		t.Errorf("newest = %+v (before %s), want the change sent once, nothing before", again, again.Before)
	}

	// An edge reads at most 64 KiB of an answer: the list leaves out the
	// oldest changes that would take it beyond 48 KiB.
	pad := strings.Repeat("x", 3500)
	for i := range 20 {
		if status, body := call(sign, "POST", `{"actor":"a","what":"big_`+string(rune('a'+i))+`","before":{"pad":"`+pad+`"}}`); status != 200 {
			t.Fatalf("POST a 3.5 KB change = %d %s", status, body)
		}
	}
	status, body = call(sign, "GET", "")
	var big struct {
		Changes []adminChangeReply `json:"changes"`
	}
	if err := json.Unmarshal(body, &big); status != 200 || err != nil || len(body) > 48<<10+64 {
		t.Fatalf("GET %s after 70 KB of changes = %d, %d bytes (%v), want 200 within 48 KiB", path, status, len(body), err)
	}
	if n := len(big.Changes); n < 10 || n >= 20 || big.Changes[0].What != "big_t" || big.Changes[n-1].What != "big_"+string(rune('t'-n+1)) {
		t.Errorf("list of the big changes = %d, from %s to %s; want the newest that fit, from big_t down", n, big.Changes[0].What, big.Changes[n-1].What)
	}
}
