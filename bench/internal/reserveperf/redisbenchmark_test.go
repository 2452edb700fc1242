package reserveperf

import (
	"slices"
	"testing"
)

func TestParseCSV(t *testing.T) {
	out := []byte(`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA abc 1 k","14337.50","100.1","1.0","102.72","200.0","259.33","300.5"
`)
	got, err := parseCSV(out)
	if err != nil {
		t.Fatalf("parseCSV = %v", err)
	}
	if got.PerSecond != 14337.5 || got.P50Millis != 102.72 || got.P99Millis != 259.33 || got.MaxMillis != 300.5 {
		t.Errorf("parseCSV = %+v, want rps 14337.5, p50 102.72, p99 259.33, max 300.5", got)
	}
	for _, bad := range []string{"", "\"test\",\"rps\"\n", "\"test\",\"rps\"\n\"x\",\"0\"\n"} {
		if _, err := parseCSV([]byte(bad)); err == nil {
			t.Errorf("parseCSV(%q) = nil error, want one", bad)
		}
	}
}

func TestConnArgs(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"redis://127.0.0.1:6379/0", []string{"-h", "127.0.0.1", "-p", "6379", "--dbnum", "0"}},
		{"redis://localhost", []string{"-h", "localhost", "-p", "6379"}},
		{"redis://:secret@127.0.0.1:6380/2", []string{"-h", "127.0.0.1", "-p", "6380", "-a", "secret", "--dbnum", "2"}},
		{"redis://bench:secret@127.0.0.1:6379", []string{"-h", "127.0.0.1", "-p", "6379", "--user", "bench", "-a", "secret"}},
	} {
		got, err := connArgs(tc.url)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("connArgs(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
	for _, bad := range []string{"rediss://127.0.0.1", "redis://127.0.0.1/x", "redis://cache.example:6379"} {
		if _, err := connArgs(bad); err == nil {
			t.Errorf("connArgs(%q) = nil error, want one", bad)
		}
	}
	if got := redact([]string{"-a", "secret", "-n", "1"}); got[1] != "***" {
		t.Errorf("redact = %q, want the password hidden", got)
	}
}
