package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"
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

// TestDeleteKeysTakesThePrefixLiterally: a prefix with SCAN's glob
// characters deletes only the keys that start with it as written.
func TestDeleteKeysTakesThePrefixLiterally(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := NewRedis(t, RedisURL())
	mine, theirs := r.Prefix+"x*[y]:", r.Prefix+"xa[y]:"
	for _, k := range []string{mine + "1", mine + "2", theirs + "1"} {
		if err := r.Client.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := DeleteKeys(ctx, r.Client, mine)
	if err != nil || n != 2 {
		t.Errorf("DeleteKeys(%q) = %d, %v; want 2", mine, n, err)
	}
	if got, err := r.Client.Exists(ctx, theirs+"1").Result(); err != nil || got != 1 {
		t.Errorf("EXISTS %s1 = %d, %v; want 1 (not under the prefix)", theirs, got, err)
	}
	if _, err := DeleteKeys(ctx, r.Client, ""); err == nil {
		t.Error("DeleteKeys with an empty prefix = nil error, want a refusal")
	}
}

// TestLoseKeysTakesEveryPageAndOnlyThePrefix: keys spread over many SCAN
// pages all go, in one command; keys outside the prefix stay.
func TestLoseKeysTakesEveryPageAndOnlyThePrefix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := NewRedis(t, RedisURL())
	mine, theirs := r.Prefix+"lose*:", r.Prefix+"losex:"
	pipe := r.Client.Pipeline()
	for i := range 2500 {
		pipe.Set(ctx, fmt.Sprintf("%s%d", mine, i), "v", 0)
	}
	pipe.Set(ctx, theirs+"1", "v", 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := LoseKeys(ctx, r.Client, mine)
	if err != nil || n != 2500 {
		t.Errorf("LoseKeys(%q) = %d, %v; want 2500", mine, n, err)
	}
	if got, err := r.Client.Exists(ctx, theirs+"1").Result(); err != nil || got != 1 {
		t.Errorf("EXISTS %s1 = %d, %v; want 1 (not under the prefix)", theirs, got, err)
	}
	if _, err := LoseKeys(ctx, r.Client, ""); err == nil {
		t.Error("LoseKeys with an empty prefix = nil error, want a refusal")
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
