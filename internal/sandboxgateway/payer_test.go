package sandboxgateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// TestPayPayer: POST /sandbox/intents/{id}/pay takes an optional
// {"payer": ...}; without one the intent gets a payer of its own. A bad
// payer is 400 bad_request and pays nothing.
func TestPayPayer(t *testing.T) {
	hundred := "upi:" + strings.Repeat("a", 96)
	tests := []struct {
		name  string
		body  string
		want  string // the payer; "" means DefaultPayer of the intent
		code  int
		valid bool
	}{
		{"no body", "", "", 200, true},
		{"empty object", `{}`, "", 200, true},
		{"null payer", `{"payer": null}`, "", 200, true},
		{"a VPA", `{"payer": "upi:alice@okbank"}`, "upi:alice@okbank", 200, true},
		{"100 bytes", `{"payer": "` + hundred + `"}`, hundred, 200, true},
		{"a card fingerprint", `{"payer": "card:Xt5EWLLDS7FJjR1c"}`, "card:Xt5EWLLDS7FJjR1c", 200, true},
		{"empty payer", `{"payer": ""}`, "", 400, false},
		{"101 bytes", `{"payer": "` + hundred + `b"}`, "", 400, false},
		{"a space", `{"payer": "upi:alice @okbank"}`, "", 400, false},
		{"a control character", `{"payer": "upi:alice\u0007@okbank"}`, "", 400, false},
		{"a newline", `{"payer": "upi:alice@okbank\n"}`, "", 400, false},
		{"not a string", `{"payer": 7}`, "", 400, false},
		{"another field", `{"payer": "upi:a@b", "amount": 1}`, "", 400, false},
		{"not JSON", `payer=upi:a@b`, "", 400, false},
	}
	f := start(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := f.create(t, "ord-"+strings.ReplaceAll(tt.name, " ", "-"))
			status, b := f.control(t, "POST", "/sandbox/intents/"+in.ID+"/pay", tt.body)
			if status != tt.code {
				t.Fatalf("pay with %q = %d %s, want %d", tt.body, status, b, tt.code)
			}
			stored, _ := f.gw.Intent(in.ID)
			if !tt.valid {
				if code := errorCode(t, b); code != "bad_request" {
					t.Errorf("pay with %q: error %s, want bad_request", tt.body, code)
				}
				if stored.Status != StatusRequiresPayment || stored.Payer != "" {
					t.Errorf("after a refused pay the intent = %s paid by %q, want requires_payment, no payer", stored.Status, stored.Payer)
				}
				return
			}
			want := tt.want
			if want == "" {
				want = DefaultPayer(in.ID)
			}
			if got := decode[Intent](t, b); got.Status != StatusSucceeded || got.Payer != want {
				t.Errorf("pay with %q = %s paid by %q, want succeeded by %q", tt.body, got.Status, got.Payer, want)
			}
			if stored.Payer != want {
				t.Errorf("stored payer = %q, want %q", stored.Payer, want)
			}
		})
	}
}

func TestDefaultPayerIsUniqueAndValid(t *testing.T) {
	f := start(t, nil)
	a, b := f.pay(t, f.create(t, "ord_a").ID), f.pay(t, f.create(t, "ord_b").ID)
	if a.Payer == b.Payer || a.Payer != "upi:payer-"+a.ID+"@sandbox" {
		t.Errorf("default payers = %q and %q, want upi:payer-<intent id>@sandbox, one each", a.Payer, b.Payer)
	}
	if !ValidPayer(a.Payer) {
		t.Errorf("ValidPayer(%q) = false, want true", a.Payer)
	}
}

// A repeated pay keeps the first payer, as it keeps everything else.
func TestPayAgainKeepsThePayer(t *testing.T) {
	f := start(t, nil)
	in := f.create(t, "ord_1")
	if got, err := f.gw.PayAs(in.ID, "upi:alice@okbank"); err != nil || got.Payer != "upi:alice@okbank" {
		t.Fatalf("PayAs(alice) = %q, %v", got.Payer, err)
	}
	status, b := f.control(t, "POST", "/sandbox/intents/"+in.ID+"/pay", `{"payer": "upi:bob@okbank"}`)
	if got := decode[Intent](t, b); status != http.StatusOK || got.Payer != "upi:alice@okbank" {
		t.Errorf("pay again as bob = %d paid by %q, want 200 still by alice", status, got.Payer)
	}
	if n := len(f.eventsOf(in.ID)); n != 1 {
		t.Errorf("events = %d, want 1", n)
	}
}

// The payer is in every answer about a paid intent: pay, get, both lists,
// and the webhook; an unpaid or failed intent has none.
func TestPayerInAnswersAndWebhooks(t *testing.T) {
	f := start(t, nil)
	in := f.create(t, "ord_1")
	failed := f.create(t, "ord_2")
	if _, err := f.gw.Fail(failed.ID); err != nil {
		t.Fatal(err)
	}
	_, b := f.api(t, "GET", "/v1/intents/"+in.ID, "", "")
	if strings.Contains(string(b), `"payer"`) {
		t.Errorf("unpaid intent %s has a payer", b)
	}
	status, b := send(t, "POST", f.url+"/sandbox/intents/"+in.ID+"/pay", `{"payer": "upi:alice@okbank"}`,
		"Authorization", "Bearer "+payKey(t, in)) // as the pay page sends it
	if status != http.StatusOK {
		t.Fatalf("pay = %d %s", status, b)
	}

	_, b = f.api(t, "GET", "/v1/intents/"+in.ID, "", "")
	if got := decode[Intent](t, b); got.Payer != "upi:alice@okbank" {
		t.Errorf("GET intent payer = %q, want upi:alice@okbank", got.Payer)
	}
	for _, list := range []func() (int, []byte){
		func() (int, []byte) { return f.api(t, "GET", "/v1/intents", "", "") },
		func() (int, []byte) { return f.control(t, "GET", "/sandbox/intents", "") },
	} {
		_, b := list()
		payers := map[string]string{}
		for _, it := range decode[map[string][]Intent](t, b)["intents"] {
			payers[it.ID] = it.Payer
		}
		if payers[in.ID] != "upi:alice@okbank" || payers[failed.ID] != "" {
			t.Errorf("listed payers = %v, want alice for %s and none for the failed %s", payers, in.ID, failed.ID)
		}
	}

	testenv.Eventually(t, 5*time.Second, "the webhook", func() bool { return len(f.hooks.requests()) == 2 })
	for _, r := range f.hooks.requests() {
		var p struct {
			Type string `json:"type"`
			Data struct {
				Intent map[string]json.RawMessage `json:"intent"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		payer, has := p.Data.Intent["payer"]
		switch p.Type {
		case EventPaymentSucceeded:
			if string(payer) != `"upi:alice@okbank"` {
				t.Errorf("%s payload payer = %s, want \"upi:alice@okbank\"", p.Type, payer)
			}
		case EventPaymentFailed:
			if has {
				t.Errorf("%s payload has a payer %s, want none", p.Type, payer)
			}
		}
	}
}
