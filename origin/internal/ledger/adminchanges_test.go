package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// Admin changes come back newest first, at most the limit, each with who,
// what and its before and after as JSON (none as nil); a before Postgres
// cannot keep is ErrInvalidState, and nothing is kept.
func TestAdminChangesRoundTrip(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	if err := Migrate(ctx, env.DB); err != nil {
		t.Fatalf("Migrate = %v", err)
	}
	s := New(env.DB)

	start := time.Now().Add(-time.Minute)
	defences, err := s.RecordAdminChange(ctx, AdminChange{Actor: "admin token 3f9a1c2b from 10.0.0.7 (priya)", What: "defences",
		Before: json.RawMessage(`{"version": 1, "tarpit": {"enabled": true}}`), After: json.RawMessage(`{"version": 2, "tarpit": {"enabled": false}}`)})
	if err != nil {
		t.Fatalf("RecordAdminChange(defences) = %v", err)
	}
	if defences.ID == 0 || defences.At.Before(start) || defences.At.Location() != time.UTC {
		t.Errorf("RecordAdminChange(defences) = %+v, want an id and a UTC time", defences)
	}
	if _, err := s.RecordAdminChange(ctx, AdminChange{Actor: "a", What: "tarpit_release",
		Before: json.RawMessage(`{"account": "mallory"}`), After: json.RawMessage(`null`)}); err != nil {
		t.Fatalf("RecordAdminChange(tarpit_release) = %v", err)
	}
	if _, err := s.RecordAdminChange(ctx, AdminChange{Actor: "a", What: "tarpit_release_failed", Before: json.RawMessage(`{"account": "mallory"}`)}); err != nil {
		t.Fatalf("RecordAdminChange(tarpit_release_failed) = %v", err)
	}
	_, err = s.RecordAdminChange(ctx, AdminChange{Actor: "a", What: "defences", Before: json.RawMessage(`{"a": "\u0000"}`)})
	if !errors.Is(err, ErrInvalidState) {
		t.Errorf(`RecordAdminChange with "\u0000" in before = %v, want ErrInvalidState`, err)
	}

	got, err := s.AdminChanges(ctx, 10)
	if err != nil {
		t.Fatalf("AdminChanges = %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("AdminChanges = %d changes, want the 3 kept", len(got))
	}
	failed, release, first := got[0], got[1], got[2]
	if first.ID != defences.ID || !first.At.Equal(defences.At) || first.Actor != defences.Actor || first.What != "defences" ||
		!sameJSON(t, first.Before, `{"version": 1, "tarpit": {"enabled": true}}`) || !sameJSON(t, first.After, `{"version": 2, "tarpit": {"enabled": false}}`) {
		t.Errorf("oldest change = %+v %s %s, want the defences change as recorded", first, first.Before, first.After)
	}
	if release.What != "tarpit_release" || !sameJSON(t, release.Before, `{"account": "mallory"}`) || release.After != nil {
		t.Errorf("release = %+v %s %s, want mallory before and nothing after", release, release.Before, release.After)
	}
	if failed.What != "tarpit_release_failed" || failed.After != nil || !(failed.ID > release.ID && release.ID > first.ID) {
		t.Errorf("newest change = %+v, want the failed release, ids rising", failed)
	}

	for i := range 4 {
		if _, err := s.RecordAdminChange(ctx, AdminChange{Actor: "a", What: fmt.Sprintf("defences_%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.AdminChanges(ctx, 2); err != nil || len(got) != 2 || got[0].What != "defences_3" || got[1].What != "defences_2" {
		t.Errorf("AdminChanges(2) = %+v, %v; want the 2 newest", got, err)
	}
}

// sameJSON reports whether raw is the JSON value want, whatever its key
// order and spacing (jsonb keeps neither).
func sameJSON(t *testing.T, raw json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Errorf("%q is not JSON: %v", raw, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
