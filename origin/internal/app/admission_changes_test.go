package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// Every admission change an edge makes is kept with who made it and the
// settings before and after, newest first, and read back through a signed
// line route; an actor that is not printable text is refused and changes
// nothing. The sale's books are read through another, as the origin's
// admin ledger answers them.
func TestAdmissionChangesAreKept(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	sale := "audit-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	path := "/v1/lines/" + sale
	if s, l := lineCall(t, o, sign, "POST", path, `{"seed":"`+seedA+`","rate_per_s":50}`); s != 200 {
		t.Fatalf("POST line = %d %+v", s, l)
	}
	for _, body := range []string{
		`{"rate_per_s":20,"actor":"token 3f9a1c2b from 10.0.0.7 (priya)"}`,
		`{"paused":true,"actor":"token 3f9a1c2b from 10.0.0.7 (priya)"}`,
		`{"challenge_bits":12}`,
	} {
		if s, l := lineCall(t, o, sign, "PUT", path+"/settings", body); s != 200 {
			t.Fatalf("PUT settings %s = %d %+v", body, s, l)
		}
	}
	if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"paused":false,"actor":"bad\u0007actor"}`); s != 400 || l.Error != "invalid_actor" {
		t.Errorf("PUT settings with a control character in actor = %d %+v, want 400 invalid_actor", s, l)
	}
	if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"paused":false,"actor":"`+strings.Repeat("a", 201)+`"}`); s != 400 || l.Error != "invalid_actor" {
		t.Errorf("PUT settings with a 201-byte actor = %d %+v, want 400 invalid_actor", s, l)
	}

	type settings struct {
		Rate   float64 `json:"rate_per_s"`
		Paused bool    `json:"paused"`
		Bits   int     `json:"challenge_bits"`
	}
	var got struct {
		Changes []struct {
			ID              int64    `json:"id"`
			Actor           string   `json:"actor"`
			SettingsVersion int64    `json:"settings_version"`
			Before          settings `json:"before"`
			After           settings `json:"after"`
		} `json:"changes"`
	}
	status, body := o.Do(t, origintest.Request{Method: "GET", Path: path + "/changes",
		Header: map[string]string{tokens.RequestSignatureHeader: sign.Sign("GET", path+"/changes", nil)}})
	if err := json.Unmarshal(body, &got); status != 200 || err != nil {
		t.Fatalf("GET changes = %d %s (%v)", status, body, err)
	}
	if len(got.Changes) != 3 {
		t.Fatalf("changes = %+v, want the 3 taken, newest first", got.Changes)
	}
	bits, pause, rate := got.Changes[0], got.Changes[1], got.Changes[2]
	if rate.Actor != "token 3f9a1c2b from 10.0.0.7 (priya)" || rate.Before != (settings{50, false, 0}) || rate.After != (settings{20, false, 0}) {
		t.Errorf("rate change = %+v", rate)
	}
	if pause.Before != (settings{20, false, 0}) || pause.After != (settings{20, true, 0}) || pause.SettingsVersion != rate.SettingsVersion+1 {
		t.Errorf("pause change = %+v (after version %d)", pause, rate.SettingsVersion)
	}
	if bits.Actor != "unnamed" || bits.Before != (settings{20, true, 0}) || bits.After != (settings{20, true, 12}) || !(bits.ID > pause.ID && pause.ID > rate.ID) {
		t.Errorf("challenge change = %+v", bits)
	}
	if status, _ := o.Do(t, origintest.Request{Method: "GET", Path: path + "/changes"}); status != 401 {
		t.Errorf("GET changes unsigned = %d, want 401", status)
	}

	var books struct {
		SKUs []struct {
			SKU   string `json:"sku"`
			Total int64  `json:"total"`
		} `json:"skus"`
	}
	status, body = o.Do(t, origintest.Request{Method: "GET", Path: path + "/books",
		Header: map[string]string{tokens.RequestSignatureHeader: sign.Sign("GET", path+"/books", nil)}})
	if err := json.Unmarshal(body, &books); status != 200 || err != nil || len(books.SKUs) != 1 || books.SKUs[0].Total != 10 {
		t.Errorf("GET books = %d %s (%v), want sku-1 of 10", status, body, err)
	}
}

// Autotune is switched on with its bounds (which come together, 0 ≤ min ≤
// max, max > 0, else 400 invalid_autotune and nothing changes), kept on
// the line, and switched off by a rate set by hand.
func TestAutotuneSettings(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	sale := "autotune-" + testenv.RandomHex(3)
	o.MustCreateSale(t, origintest.OpenSale(sale, 10, 600))
	sign := tokens.NewRequestSigner(tokenstest.KeySet(), publicHost, nil)
	path := "/v1/lines/" + sale
	if s, l := lineCall(t, o, sign, "POST", path, `{"seed":"`+seedA+`","rate_per_s":50}`); s != 200 {
		t.Fatalf("POST line = %d %+v", s, l)
	}
	for _, body := range []string{
		`{"autotune":true}`,
		`{"autotune":true,"autotune_min_rate_per_s":10}`,
		`{"autotune":true,"autotune_min_rate_per_s":100,"autotune_max_rate_per_s":10}`,
		`{"autotune":true,"autotune_min_rate_per_s":0,"autotune_max_rate_per_s":0}`,
		`{"autotune":true,"autotune_min_rate_per_s":-1,"autotune_max_rate_per_s":10}`,
		`{"autotune_min_rate_per_s":1,"autotune_max_rate_per_s":2000000}`,
	} {
		if s, l := lineCall(t, o, sign, "PUT", path+"/settings", body); s != 400 || l.Error != "invalid_autotune" {
			t.Errorf("PUT settings %s = %d %+v, want 400 invalid_autotune", body, s, l)
		}
	}
	read := func() map[string]any {
		t.Helper()
		status, body := o.Do(t, origintest.Request{Method: "GET", Path: path,
			Header: map[string]string{tokens.RequestSignatureHeader: sign.Sign("GET", path, nil)}})
		var l map[string]any
		if err := json.Unmarshal(body, &l); status != 200 || err != nil {
			t.Fatalf("GET line = %d %s (%v)", status, body, err)
		}
		return l
	}
	if l := read(); l["autotune"] != false || l["settings_version"] != 0.0 {
		t.Fatalf("line after the refusals = %v, want autotune off and no change", l)
	}
	if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"autotune":true,"autotune_min_rate_per_s":20,"autotune_max_rate_per_s":500}`); s != 200 {
		t.Fatalf("PUT autotune on = %d %+v", s, l)
	}
	if l := read(); l["autotune"] != true || l["autotune_min_rate_per_s"] != 20.0 || l["autotune_max_rate_per_s"] != 500.0 || l["rate_per_s"] != 50.0 {
		t.Errorf("line with autotune on = %v", l)
	}
	if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"paused":true}`); s != 200 {
		t.Fatalf("PUT paused = %d %+v", s, l)
	}
	if l := read(); l["autotune"] != true {
		t.Errorf("line after a pause = %v, want autotune still on", l)
	}
	if s, l := lineCall(t, o, sign, "PUT", path+"/settings", `{"rate_per_s":75}`); s != 200 {
		t.Fatalf("PUT rate = %d %+v", s, l)
	}
	if l := read(); l["autotune"] != false || l["rate_per_s"] != 75.0 {
		t.Errorf("line after a rate set by hand = %v, want autotune off at 75", l)
	}
}
