package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/testenv"
)

// fakeAudit keeps the admin changes recorded; record, when set, decides
// each record's fate (an error: not recorded).
type fakeAudit struct {
	mu     sync.Mutex // guards kept
	kept   []line.AdminChange
	record func(line.AdminChange) error
}

var _ interface {
	OriginOps
	AdminAudit
} = (*fakeAudit)(nil)

func (f *fakeAudit) RecordAdminChange(_ context.Context, c line.AdminChange) error {
	if f.record != nil {
		if err := f.record(c); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kept = append(f.kept, c)
	return nil
}

func (f *fakeAudit) whats() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.kept {
		out = append(out, c.What)
	}
	return out
}

func (f *fakeAudit) AdminChanges(context.Context) (json.RawMessage, error) {
	return nil, errors.New("unused")
}
func (f *fakeAudit) Changes(context.Context, string) (json.RawMessage, error) {
	return nil, errors.New("unused")
}
func (f *fakeAudit) Books(context.Context, string) (json.RawMessage, error) {
	return nil, errors.New("unused")
}

// auditServer is a Server with defences on their own Redis client (which a
// test may close, so that Redis then fails) under a fresh prefix, and ops
// as its origin (nil: none). The tarpit holds mallory.
func auditServer(t *testing.T, ops OriginOps) (*Server, *defence.Defences, *redis.Client) {
	t.Helper()
	r := testenv.NewRedis(t, testenv.RedisURL())
	opts, err := redisconn.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	st := defence.DefaultSettings("", "")
	st.Tarpit.Offences = 3
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := defence.New(rdb, r.Prefix, defence.Options{Defaults: st, Log: log})
	for range 3 {
		d.Offence("mallory", "test")
	}
	s := New(Deps{Defences: d, Ops: ops, Registry: prometheus.NewRegistry(), Log: log, AdminToken: "test-token"}, Options{})
	return s, d, rdb
}

// adminCall runs handler h on a request of method to path with body, and
// answers its status and error code (as errorTable answers an error).
func adminCall(h handler, method, path, body string) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("192.0.2.9"), Port: 1234}, nil)
	if err := h(&ctx, nil); err != nil {
		e, _ := errorTable.Classify(err)
		return e.Status, e.Code
	}
	return ctx.Response.StatusCode(), ""
}

// An admin change is recorded before it is made, and not made when it is
// not recorded (no origin, or the origin refusing): please_wait, the
// defences and the tarpit as they were. A change recorded that then does
// not land (Redis gone between the two) is recorded again as failed, with
// the same before and after. A bad body is refused before anything is
// recorded.
func TestAdminChangesRecordedFirst(t *testing.T) {
	t.Parallel()
	const settings = `{"tarpit": {"enabled": false}}`
	tests := []struct {
		name string
		// audit is the origin (nil: none); redisFails closes the
		// defences' Redis client as the first record is taken.
		audit      *fakeAudit
		redisFails bool
		status     int
		code       string
		recorded   []string
	}{
		{"recorded and made", &fakeAudit{}, false, 200, "", []string{"defences", "tarpit_release"}},
		{"no origin", nil, false, 503, "please_wait", nil},
		{"origin refuses", &fakeAudit{record: func(line.AdminChange) error { return errors.New("origin answered 503") }}, false, 503, "please_wait", nil},
		{"redis fails after the record", &fakeAudit{}, true, 503, "please_wait", []string{"defences", "defences_failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ops OriginOps
			if tt.audit != nil {
				ops = tt.audit
			}
			s, d, rdb := auditServer(t, ops)
			if tt.redisFails {
				var once sync.Once
				tt.audit.record = func(line.AdminChange) error {
					once.Do(func() { _ = rdb.Close() })
					return nil
				}
			}
			before := d.Settings()
			if status, code := adminCall(s.putDefences, "PUT", "/admin/defences", `{"tarpit": {"offences": 2}}`); status != 400 || code != codeInvalidDefences {
				t.Errorf("PUT a bad body = %d %s, want 400 %s", status, code, codeInvalidDefences)
			}
			status, code := adminCall(s.putDefences, "PUT", "/admin/defences", settings)
			if status != tt.status || code != tt.code {
				t.Errorf("PUT /admin/defences = %d %s, want %d %s", status, code, tt.status, tt.code)
			}
			if tt.status == 200 {
				if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != 200 {
					t.Errorf("release mallory = %d %s, want 200", status, code)
				}
				if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != 404 {
					t.Errorf("release mallory again = %d %s, want 404 and nothing recorded", status, code)
				}
			} else {
				if got := d.Settings(); got != before {
					t.Errorf("settings after a refused PUT = %+v, want those before, %+v", got, before)
				}
				if !tt.redisFails {
					if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != tt.status || code != tt.code {
						t.Errorf("release mallory = %d %s, want %d %s", status, code, tt.status, tt.code)
					}
					if err := d.Sync(context.Background()); err != nil {
						t.Fatal(err)
					}
					if got := d.Settings(); got != before || len(d.List()) != 1 {
						t.Errorf("after a sync: settings %+v, tarpit %+v; want those before and mallory held", got, d.List())
					}
				}
			}
			if tt.audit == nil {
				return
			}
			if got := tt.audit.whats(); !equalStrings(got, tt.recorded) {
				t.Fatalf("recorded %q, want %q", got, tt.recorded)
			}
			if len(tt.recorded) == 0 {
				return
			}
			first := tt.audit.kept[0]
			var b, a defence.Settings
			if json.Unmarshal(first.Before, &b) != nil || json.Unmarshal(first.After, &a) != nil ||
				b != before || a.Version != before.Version+1 || a.Tarpit.Enabled || !b.Tarpit.Enabled {
				t.Errorf("defences record: before %s, after %s; want the settings before and with the tarpit off, one version up", first.Before, first.After)
			}
			if first.Actor != s.actorOf(adminCtx()) {
				t.Errorf("actor = %q, want %q", first.Actor, s.actorOf(adminCtx()))
			}
			second := tt.audit.kept[1]
			switch second.What {
			case "defences_failed":
				if string(second.Before) != string(first.Before) || string(second.After) != string(first.After) || second.Actor != first.Actor {
					t.Errorf("failed record = %+v, want the change's actor, before and after", second)
				}
			case "tarpit_release":
				var e defence.Entry
				if json.Unmarshal(second.Before, &e) != nil || e.Account != "mallory" || e.Reason != defence.ReasonOffences || second.After != nil {
					t.Errorf("release record: before %s, after %s; want mallory's entry and none", second.Before, second.After)
				}
			}
		})
	}
}

// adminCtx is a request from the address adminCall sends from.
func adminCtx() *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.ParseIP("192.0.2.9"), Port: 1234}, nil)
	return &ctx
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A tarpit release recorded that then does not land (Redis gone between
// the two) is recorded again as failed, and the entry stays.
func TestTarpitReleaseFailedRecorded(t *testing.T) {
	t.Parallel()
	audit := &fakeAudit{}
	s, d, rdb := auditServer(t, audit)
	var once sync.Once
	audit.record = func(line.AdminChange) error {
		once.Do(func() { _ = rdb.Close() })
		return nil
	}
	if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != 503 || code != "please_wait" {
		t.Errorf("release with Redis gone = %d %s, want 503 please_wait", status, code)
	}
	if got := audit.whats(); !equalStrings(got, []string{"tarpit_release", "tarpit_release_failed"}) {
		t.Fatalf("recorded %q, want the release and its failure", got)
	}
	if release, failed := audit.kept[0], audit.kept[1]; string(failed.Before) != string(release.Before) || failed.After != nil {
		t.Errorf("failed record: before %s, after %s; want the release's (%s) and none", failed.Before, failed.After, release.Before)
	}
	if l := d.List(); len(l) != 1 || l[0].Account != "mallory" {
		t.Errorf("tarpit = %+v, want mallory still held", l)
	}
}
