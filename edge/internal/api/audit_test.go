package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
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
	mu     sync.Mutex // guards kept and tried
	kept   []line.AdminChange
	tried  []string // every record's what, kept or not
	record func(line.AdminChange) error
}

var _ AdminAudit = (*fakeAudit)(nil)

func (f *fakeAudit) RecordAdminChange(_ context.Context, c line.AdminChange) error {
	f.mu.Lock()
	f.tried = append(f.tried, c.What)
	f.mu.Unlock()
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

// whats are the records kept, by what.
func (f *fakeAudit) whats() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.kept {
		out = append(out, c.What)
	}
	return out
}

func (f *fakeAudit) triedWhats() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.tried...)
}

func (f *fakeAudit) AdminChanges(context.Context) (json.RawMessage, error) {
	return nil, errors.New("unused")
}

// redisFault fails the next write (a pipeline: Change's MULTI/EXEC,
// Release's XADD) of the Redis client it hooks, once armed: after Redis
// applied it when applied is set (a timeout that came too late), before
// otherwise. With down set, every command after that write fails too, so
// that a re-read cannot tell, until heal.
type redisFault struct {
	mu      sync.Mutex // guards all below
	armed   bool
	applied bool
	down    bool
	tripped bool
}

var _ redis.Hook = (*redisFault)(nil)

var errRedisFault = errors.New("i/o timeout (redisFault)")

func (f *redisFault) arm(applied, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.applied, f.down, f.tripped = true, applied, down, false
}

func (f *redisFault) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.down = false, false
}

// isDown reports whether commands fail: down, and the write tripped.
func (f *redisFault) isDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down && f.tripped
}

// trip reports whether this write is to fail, and whether to apply it first.
func (f *redisFault) trip() (fail, apply bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return false, true
	}
	f.armed, f.tripped = false, true
	return true, f.applied
}

func (f *redisFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *redisFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.isDown() {
			cmd.SetErr(errRedisFault)
			return errRedisFault
		}
		return next(ctx, cmd)
	}
}

func (f *redisFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if f.isDown() {
			return failAll(cmds)
		}
		fail, apply := f.trip()
		if apply {
			if err := next(ctx, cmds); err != nil || !fail {
				return err
			}
		}
		return failAll(cmds)
	}
}

func failAll(cmds []redis.Cmder) error {
	for _, c := range cmds {
		c.SetErr(errRedisFault)
	}
	return errRedisFault
}

// auditServer is a Server with defences on their own Redis client (which
// fault can fail, or a test close) under a fresh prefix, and audit as its
// record of admin changes (nil: none). The tarpit holds mallory, in Redis
// too.
func auditServer(t *testing.T, audit AdminAudit) (*Server, *defence.Defences, *redis.Client, *redisFault) {
	t.Helper()
	r := testenv.NewRedis(t, testenv.RedisURL())
	opts, err := redisconn.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	fault := &redisFault{}
	rdb.AddHook(fault)
	st := defence.DefaultSettings("", "")
	st.Tarpit.Offences = 3
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := defence.New(rdb, r.Prefix, defence.Options{Defaults: st, Log: log})
	for range 3 {
		d.Offence("mallory", "test")
	}
	if err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := New(Deps{Defences: d, Audit: audit, Registry: prometheus.NewRegistry(), Log: log, AdminToken: "test-token"}, Options{})
	return s, d, rdb, fault
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
// not recorded (no audit, the origin unreachable, or the origin refusing
// the record): please_wait, the defences and the tarpit as they were. A
// record that may have been kept (no answer) is followed by a _failed one;
// one the origin refused (4xx, so not kept) is not, and is logged as an
// error. A bad body is refused before anything is recorded.
func TestAdminChangesRecordedFirst(t *testing.T) {
	t.Parallel()
	const settings = `{"tarpit": {"enabled": false}}`
	refused := fmt.Errorf("POST /v1/admin-changes: %w", &line.OriginError{Status: 400, Code: "invalid_what"})
	tests := []struct {
		name  string
		audit *fakeAudit // nil: none
		// status and code answer the PUT; tried are the records sent,
		// kept those the origin kept.
		status      int
		code        string
		tried, kept []string
		logged      string // in the log, when not ""
	}{
		{"recorded and made", &fakeAudit{}, 200, "",
			[]string{"defences", "tarpit_release"}, []string{"defences", "tarpit_release"}, ""},
		{"no audit", nil, 503, "please_wait", nil, nil, ""},
		{"origin unreachable", &fakeAudit{record: func(line.AdminChange) error { return errors.New("dial tcp: connection refused") }}, 503, "please_wait",
			[]string{"defences", "defences_failed", "tarpit_release", "tarpit_release_failed"}, nil, ""},
		{"origin refuses the record", &fakeAudit{record: func(line.AdminChange) error { return refused }}, 503, "please_wait",
			[]string{"defences", "tarpit_release"}, nil, "level=ERROR msg=\"the origin refused the record of an admin change, so it was not made\" what=defences"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var audit AdminAudit
			if tt.audit != nil {
				audit = tt.audit
			}
			s, d, _, _ := auditServer(t, audit)
			var logs bytes.Buffer
			s.Log = slog.New(slog.NewTextHandler(&logs, nil))
			before := d.Settings()
			if status, code := adminCall(s.putDefences, "PUT", "/admin/defences", `{"tarpit": {"offences": 2}}`); status != 400 || code != codeInvalidDefences {
				t.Errorf("PUT a bad body = %d %s, want 400 %s", status, code, codeInvalidDefences)
			}
			status, code := adminCall(s.putDefences, "PUT", "/admin/defences", settings)
			if status != tt.status || code != tt.code {
				t.Errorf("PUT /admin/defences = %d %s, want %d %s", status, code, tt.status, tt.code)
			}
			release, releaseCode := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", "")
			if release != tt.status || releaseCode != tt.code {
				t.Errorf("release mallory = %d %s, want %d %s", release, releaseCode, tt.status, tt.code)
			}
			if tt.status == 200 {
				if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != 404 {
					t.Errorf("release mallory again = %d %s, want 404 and nothing recorded", status, code)
				}
			} else {
				if err := d.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := d.Settings(); got != before || len(d.List()) != 1 {
					t.Errorf("after a sync: settings %+v, tarpit %+v; want those before and mallory held", got, d.List())
				}
			}
			if tt.logged != "" && !strings.Contains(logs.String(), tt.logged) {
				t.Errorf("log = %s, want %q", logs.String(), tt.logged)
			}
			if tt.audit == nil {
				return
			}
			if got := tt.audit.triedWhats(); !equalStrings(got, tt.tried) {
				t.Errorf("records sent %q, want %q", got, tt.tried)
			}
			if got := tt.audit.whats(); !equalStrings(got, tt.kept) {
				t.Fatalf("records kept %q, want %q", got, tt.kept)
			}
			if len(tt.kept) == 0 {
				return
			}
			first, second := tt.audit.kept[0], tt.audit.kept[1]
			var b, a defence.Settings
			if json.Unmarshal(first.Before, &b) != nil || json.Unmarshal(first.After, &a) != nil ||
				b != before || a.Version != before.Version+1 || a.Tarpit.Enabled || !b.Tarpit.Enabled {
				t.Errorf("defences record: before %s, after %s; want the settings before and with the tarpit off, one version up", first.Before, first.After)
			}
			if first.Actor != s.actorOf(adminCtx()) {
				t.Errorf("actor = %q, want %q", first.Actor, s.actorOf(adminCtx()))
			}
			var e defence.Entry
			if json.Unmarshal(second.Before, &e) != nil || e.Account != "mallory" || e.Reason != defence.ReasonOffences || second.After != nil {
				t.Errorf("release record: before %s, after %s; want mallory's entry and none", second.Before, second.After)
			}
		})
	}
}

// A change recorded whose write Redis does not confirm (a timeout, its
// answer lost) is read back before anything more is said: when it is not
// in force it did not land, recorded again as _failed and please_wait;
// when it is, it landed, 200 and nothing more recorded; when the re-read
// fails too, nobody can tell, recorded again as _unknown and please_wait.
// The second record has the first's actor, before and after.
func TestAdminChangeNotConfirmed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// applied: Redis applied the write before failing it; down: the
		// re-read fails too.
		applied, down bool
		status        int
		code          string
		outcome       string // the second record's suffix; "": none
	}{
		{"not made", false, false, 503, "please_wait", outcomeFailed},
		{"made, answer lost", true, false, 200, "", ""},
		{"made, re-read fails", true, true, 503, "please_wait", outcomeUnknown},
		{"not made, re-read fails", false, true, 503, "please_wait", outcomeUnknown},
	}
	for _, tt := range tests {
		for _, what := range []string{"defences", "tarpit_release"} {
			t.Run(tt.name+"/"+what, func(t *testing.T) {
				t.Parallel()
				audit := &fakeAudit{}
				s, d, _, fault := auditServer(t, audit)
				before := d.Settings()
				fault.arm(tt.applied, tt.down)
				var status int
				var code string
				if what == "defences" {
					status, code = adminCall(s.putDefences, "PUT", "/admin/defences", `{"tarpit": {"enabled": false}}`)
				} else {
					status, code = adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", "")
				}
				if status != tt.status || code != tt.code {
					t.Errorf("%s = %d %s, want %d %s", what, status, code, tt.status, tt.code)
				}
				want := []string{what}
				if tt.outcome != "" {
					want = append(want, what+tt.outcome)
				}
				if got := audit.whats(); !equalStrings(got, want) {
					t.Fatalf("recorded %q, want %q", got, want)
				}
				if len(want) == 2 {
					first, second := audit.kept[0], audit.kept[1]
					if string(second.Before) != string(first.Before) || string(second.After) != string(first.After) || second.Actor != first.Actor {
						t.Errorf("%s record = %+v, want the change's actor, before and after (%+v)", second.What, second, first)
					}
				}
				// Redis holds the change exactly when it was applied.
				fault.heal()
				if err := d.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				changed := d.Settings() != before
				if what == "tarpit_release" {
					changed = len(d.List()) == 0
				}
				if changed != tt.applied {
					t.Errorf("after a sync: settings %+v, tarpit %+v; want the change made: %v", d.Settings(), d.List(), tt.applied)
				}
			})
		}
	}
}

// A tarpit entry gone between the handler's check and the release (here
// released by another, without a record) is 404: the release is recorded,
// then recorded as failed.
func TestTarpitReleaseGoneMeanwhile(t *testing.T) {
	t.Parallel()
	audit := &fakeAudit{}
	s, d, _, _ := auditServer(t, audit)
	var once sync.Once
	audit.record = func(line.AdminChange) error {
		var err error
		once.Do(func() { _, err = d.Release(context.Background(), "mallory") })
		return err
	}
	if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != 404 || code != codeNotTarpitted {
		t.Errorf("release of an entry gone meanwhile = %d %s, want 404 %s", status, code, codeNotTarpitted)
	}
	if got := audit.whats(); !equalStrings(got, []string{"tarpit_release", "tarpit_release_failed"}) {
		t.Errorf("recorded %q, want the release and its failure", got)
	}
}

// With the defences' Redis gone before anything is recorded (the handler's
// first read of it fails), nothing is recorded and the answer is
// please_wait.
func TestAdminChangeRedisGoneFirst(t *testing.T) {
	t.Parallel()
	audit := &fakeAudit{}
	s, _, rdb, _ := auditServer(t, audit)
	_ = rdb.Close()
	if status, code := adminCall(s.putDefences, "PUT", "/admin/defences", `{"tarpit": {"enabled": false}}`); status != 503 || code != "please_wait" {
		t.Errorf("PUT /admin/defences with Redis gone = %d %s, want 503 please_wait", status, code)
	}
	if status, code := adminCall(s.releaseTarpit, "DELETE", "/admin/tarpit?account=mallory", ""); status != 503 || code != "please_wait" {
		t.Errorf("release with Redis gone = %d %s, want 503 please_wait", status, code)
	}
	if got := audit.triedWhats(); len(got) != 0 {
		t.Errorf("records sent %q, want none", got)
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
