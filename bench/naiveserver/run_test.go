package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/naive"
	"github.com/flashgate/flashgate/internal/testenv"
)

func TestLoadOptions(t *testing.T) {
	env := map[string]string{"FLASHGATE_POSTGRES_URL": "postgres://u:pg-secret-0123@127.0.0.1/db"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for none
	}{
		{"defaults", nil, ""},
		{"another loopback port", []string{"-listen", "127.0.0.1:9500"}, ""},
		{"every interface", []string{"-listen", ":9400"}, "loopback"},
		{"a remote Postgres", []string{"-postgres-url", "postgres://db.example.com/db"}, "loopback"},
		{"no pool", []string{"-pool", "0"}, "-pool"},
		{"stray argument", []string{"extra"}, "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := loadOptions(tt.args, getenv, io.Discard)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("loadOptions(%q) = %v, want nil", tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("loadOptions(%q) = %v, want an error naming %q", tt.args, err, tt.wantErr)
			case err == nil && (o.PostgresURL != env["FLASHGATE_POSTGRES_URL"] || o.PoolSize != 64):
				t.Errorf("loadOptions(%q) = postgres %q, pool %d; want the variable's, 64", tt.args, o.PostgresURL, o.PoolSize)
			}
		})
	}
	var help strings.Builder
	_, _ = loadOptions([]string{"-h"}, getenv, &help)
	if strings.Contains(help.String(), "pg-secret") {
		t.Errorf("-h printed the Postgres password:\n%s", help.String())
	}
}

// The server comes up on the address it is given, serves its admin routes,
// and stops when its context ends.
func TestRunServesUntilStopped(t *testing.T) {
	env := testenv.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", addr, "-pool", "4", "-stock", "7", "-schema", "naive_" + testenv.RandomHex(4)},
			func(k string) string { return map[string]string{"FLASHGATE_POSTGRES_URL": env.PostgresURL}[k] }, &logs)
	}()
	c := naive.NewClient("http://" + addr)
	var st naive.State
	testenv.Eventually(t, 10*time.Second, "the server answering State", func() bool {
		st, err = c.State(ctx)
		return err == nil
	})
	if want := (naive.State{StockLeft: 7, PoolSize: 4}); st != want {
		t.Errorf("State = %+v; want %+v", st, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v, want nil after its context ended", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop within 15 s of its context ending")
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("log = %q, want it to say it stopped", logs.String())
	}
}
