package testenv

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var _ TB = testing.TB(nil)

// TestEnvIsTheTestsOwnAndRemoved: a table and keys made through an Env land
// in its schema and under its prefix, and both are gone after the test.
func TestEnvIsTheTestsOwnAndRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var e *Env
	t.Run("inner", func(t *testing.T) {
		e = New(t)
		if _, err := e.DB.Exec(ctx, "CREATE TABLE things (id int)"); err != nil {
			t.Fatal(err)
		}
		var schema string
		if err := e.DB.QueryRow(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 'things' AND table_schema = $1", e.Schema).Scan(&schema); err != nil {
			t.Fatalf("table things in schema %s: %v", e.Schema, err)
		}
		for _, k := range []string{"a", "b:c"} {
			if err := e.Redis.Set(ctx, e.Prefix+k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	other := NewRedis(t, RedisURL())
	if n, err := other.Client.Exists(ctx, e.Prefix+"a", e.Prefix+"b:c").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of the inner test's keys after it ended = %d, %v; want 0", n, err)
	}
	outer := New(t)
	var exists bool
	if err := outer.DB.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", e.Schema).Scan(&exists); err != nil || exists {
		t.Errorf("schema %s after the inner test ended: exists %v, %v; want dropped", e.Schema, exists, err)
	}
}

// TestDeleteAndLoseKeys: both remove every key under a prefix taken
// literally (SCAN's glob characters in it match only themselves), over
// many SCAN pages, and nothing else; both refuse an empty prefix.
func TestDeleteAndLoseKeys(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(context.Context, redis.UniversalClient, string) (int, error)
	}{{"DeleteKeys", DeleteKeys}, {"LoseKeys", LoseKeys}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := NewRedis(t, RedisURL())
			mine, theirs := r.Prefix+"x*[y]:", r.Prefix+"xa[y]:"
			pipe := r.Client.Pipeline()
			for i := range 2500 {
				pipe.Set(ctx, fmt.Sprintf("%s%d", mine, i), "v", 0)
			}
			pipe.Set(ctx, theirs+"1", "v", 0)
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := c.remove(ctx, r.Client, mine); err != nil || n != 2500 {
				t.Errorf("%s(%q) = %d, %v; want 2500", c.name, mine, n, err)
			}
			if got, err := r.Client.Exists(ctx, theirs+"1").Result(); err != nil || got != 1 {
				t.Errorf("EXISTS %s1 = %d, %v; want 1 (not under the prefix)", theirs, got, err)
			}
			if _, err := c.remove(ctx, r.Client, ""); err == nil {
				t.Errorf("%s with an empty prefix = nil error, want a refusal", c.name)
			}
		})
	}
}

func TestCreateSchemaRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "1abc", "a-b", "A", "a;drop"} {
		if _, _, err := CreateSchema(context.Background(), PostgresURL(), name); err == nil {
			t.Errorf("CreateSchema(%q) = nil error, want a refusal", name)
		}
	}
	if n := Name("reservebench"); !validIdent(n) || len(n) != len("reservebench_")+8 {
		t.Errorf("Name(reservebench) = %q, want reservebench_ and 8 hex digits", n)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"redis://127.0.0.1:6379/0", true},
		{"redis://localhost:6379", true},
		{"redis://[::1]:6379", true},
		{"postgres://postgres@127.0.0.1:5432/flashgate_bench?sslmode=disable", true},
		{"postgres:///flashgate_bench?host=/var/run/postgresql", true},
		{"redis://10.0.0.5:6379", false},
		{"postgres://db.example.com/flashgate", false},
	} {
		if err := LoopbackOnly(tc.url); (err == nil) != tc.ok {
			t.Errorf("LoopbackOnly(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
}

func TestSchemaNameIsAValidIdentifier(t *testing.T) {
	for _, test := range []string{"TestX", "TestReserve/sold_out-path", "TestAVeryLongNameThatGoesOnAndOnBeyondFortyCharactersForSure"} {
		if got := schemaName(test, "0123456789"); !validIdent(got) {
			t.Errorf("schemaName(%q) = %q, not a valid schema name", test, got)
		}
	}
}

// Eventually returns once the condition holds, and fails the test (on a
// test of its own) when it never does.
func TestEventually(t *testing.T) {
	calls := 0
	Eventually(t, time.Second, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("Eventually asked %d times, want 3", calls)
	}
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(ft, 30*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if !strings.Contains(ft.msg, "never: still not so after 30ms") {
		t.Errorf("Eventually on a condition that never holds failed with %q", ft.msg)
	}
}

// fatalRecorder keeps a Fatalf's message and ends its goroutine, as
// testing.T's does, without failing the test it wraps.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
