package app_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
)

// adminChangesReply is GET /admin/changes.
type adminChangesReply struct {
	Changes []struct {
		ID     int64           `json:"id"`
		Actor  string          `json:"actor"`
		What   string          `json:"what"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	} `json:"changes"`
}

func getAdminChanges(t *testing.T, n *edgetest.Node) adminChangesReply {
	t.Helper()
	res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/changes"})
	var got adminChangesReply
	if err := json.Unmarshal(res.Body, &got); res.Status != fasthttp.StatusOK || err != nil {
		t.Fatalf("GET /admin/changes = %d %s (%v), want 200", res.Status, res.Body, err)
	}
	return got
}

func getDefences(t *testing.T, n *edgetest.Node) defence.Settings {
	t.Helper()
	res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/defences"})
	var st defence.Settings
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &st) != nil {
		t.Fatalf("GET /admin/defences = %d %s, want 200", res.Status, res.Body)
	}
	return st
}

// Ops' changes of the defences and releases from the tarpit, made on a
// real edge and origin, are kept at the origin and read back newest first
// through GET /admin/changes: who (the token's fingerprint, never the
// token, the address and the operator), and the state before and after.
// Refused changes keep nothing, and GET /admin/changes needs the token.
// That the changes are made at all shows the app wiring its origin store
// as the API's Deps.Audit: without one, each is refused please_wait.
func TestAdminChangesAudited(t *testing.T) {
	t.Parallel()
	_, counting := realOrigin(t)
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), counting.URL))
	if got := getAdminChanges(t, n); len(got.Changes) != 0 {
		t.Fatalf("changes before any = %+v, want none", got.Changes)
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/changes", Token: "-"}); res.Status != fasthttp.StatusUnauthorized {
		t.Errorf("GET /admin/changes with a wrong token = %d, want 401", res.Status)
	}

	before := getDefences(t, n)
	res := n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(`{"tarpit": {"offences": 3}}`),
		Header: map[string]string{"X-Operator": "priya"}})
	var after defence.Settings
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &after) != nil || after.Tarpit.Offences != 3 {
		t.Fatalf("PUT /admin/defences = %d %s, want 200 with 3 offences", res.Status, res.Body)
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(`{"tarpit": {"offences": 1}}`)}); res.Status != fasthttp.StatusBadRequest {
		t.Errorf("PUT a bad body = %d %s, want 400", res.Status, res.Body)
	}
	for range 3 {
		n.App.Defences.Offence("mallory", "test")
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "DELETE", Path: "/admin/tarpit?account=nobody"}); res.Status != fasthttp.StatusNotFound {
		t.Errorf("release of an account not held = %d %s, want 404", res.Status, res.Body)
	}
	res = n.DoAdmin(t, edgetest.Request{Method: "DELETE", Path: "/admin/tarpit?account=mallory"})
	var released defence.Entry
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &released) != nil || released.Account != "mallory" {
		t.Fatalf("release mallory = %d %s, want 200 with the entry", res.Status, res.Body)
	}

	got := getAdminChanges(t, n)
	if len(got.Changes) != 2 {
		t.Fatalf("changes = %+v, want the release and the defences change, none of the refused", got.Changes)
	}
	release, defences := got.Changes[0], got.Changes[1]
	sum := sha256.Sum256([]byte(edgetest.AdminToken))
	fingerprint := "admin token " + hex.EncodeToString(sum[:4]) + " from " + edgetest.DefaultClientIP
	if defences.What != "defences" || defences.Actor != fingerprint+" (priya)" || strings.Contains(defences.Actor, edgetest.AdminToken) {
		t.Errorf("defences change by %q (%s), want %q", defences.Actor, defences.What, fingerprint+" (priya)")
	}
	var b, a defence.Settings
	if json.Unmarshal(defences.Before, &b) != nil || json.Unmarshal(defences.After, &a) != nil || b != before || a != after {
		t.Errorf("defences change: before %s, after %s; want %+v and %+v", defences.Before, defences.After, before, after)
	}
	var e defence.Entry
	if release.What != "tarpit_release" || release.Actor != fingerprint || release.ID <= defences.ID ||
		json.Unmarshal(release.Before, &e) != nil || e.Account != "mallory" || e.Reason != defence.ReasonOffences ||
		!e.Until.Equal(released.Until) || string(release.After) != "null" {
		t.Errorf("release = %+v (before %s, after %s), want mallory's entry by %q, nothing after", release, release.Before, release.After, fingerprint)
	}
}

// With the origin down, an admin change cannot be recorded, so it is not
// made: PUT /admin/defences and DELETE /admin/tarpit answer please_wait,
// and the defences and the tarpit stay as they were, on this node and in
// Redis; GET /admin/changes answers please_wait too.
func TestAdminChangeRefusedWithoutOrigin(t *testing.T) {
	t.Parallel()
	o, counting := realOrigin(t)
	n := edgetest.StartNode(t, edgetest.Config(edgetest.NewRedis(t), counting.URL))
	putDefences(t, n, `{"tarpit": {"offences": 3}}`)
	for range 3 {
		n.App.Defences.Offence("mallory", "test")
	}
	before := getDefences(t, n)
	o.Stop()

	res := n.DoAdmin(t, edgetest.Request{Method: "PUT", Path: "/admin/defences", Body: []byte(`{"tarpit": {"enabled": false}}`)})
	if res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" {
		t.Errorf("PUT /admin/defences with the origin down = %d %s, want 503 please_wait", res.Status, res.Body)
	}
	res = n.DoAdmin(t, edgetest.Request{Method: "DELETE", Path: "/admin/tarpit?account=mallory"})
	if res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" {
		t.Errorf("release mallory with the origin down = %d %s, want 503 please_wait", res.Status, res.Body)
	}
	if res := n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/changes"}); res.Status != fasthttp.StatusServiceUnavailable || res.ErrorCode() != "please_wait" {
		t.Errorf("GET /admin/changes with the origin down = %d %s, want 503 please_wait", res.Status, res.Body)
	}
	// What Redis holds comes back to the node at a sync.
	if err := n.App.Defences.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := getDefences(t, n); got != before {
		t.Errorf("defences after the refused change = %+v, want those before, %+v", got, before)
	}
	res = n.DoAdmin(t, edgetest.Request{Method: "GET", Path: "/admin/tarpit"})
	var list struct{ Entries []defence.Entry }
	if res.Status != fasthttp.StatusOK || json.Unmarshal(res.Body, &list) != nil || len(list.Entries) != 1 || list.Entries[0].Account != "mallory" {
		t.Errorf("GET /admin/tarpit after the refused release = %d %s, want mallory still held", res.Status, res.Body)
	}
}
