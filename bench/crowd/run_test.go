package main

import (
	"io"
	"strings"
	"testing"
)

func TestLoadOnlyTargetsThisMachine(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:8080":                     true,
		"http://localhost:9091":                     true,
		"http://[::1]:9300":                         true,
		"postgres://postgres@127.0.0.1:5432/db":     true,
		"http://127.0.0.1.example.com:8080":         false,
		"http://10.0.0.5:8080":                      false,
		"postgres://postgres@db.example.com/db":     false,
		"http://example.com/?next=http://127.0.0.1": false,
	} {
		if got := loopback(url); got != want {
			t.Errorf("loopback(%q) = %v, want %v", url, got, want)
		}
	}
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_POSTGRES_URL": "postgres://127.0.0.1/db"}
	getenv := func(k string) string { return env[k] }
	if _, err := loadOptions([]string{"-edge-url", "http://127.0.0.1.example.com:8080"}, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("loadOptions(a remote edge) = %v, want a refusal", err)
	}
	if _, err := loadOptions(nil, getenv, io.Discard); err != nil {
		t.Errorf("loadOptions(defaults) = %v, want nil", err)
	}
}
