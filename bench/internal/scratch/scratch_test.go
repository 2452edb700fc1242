package scratch

import "testing"

func TestLoopback(t *testing.T) {
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
		if err := Loopback(tc.url); (err == nil) != tc.ok {
			t.Errorf("Loopback(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
}

func TestGlobEscape(t *testing.T) {
	if got, want := globEscape(`a*b?c[d]e\f`), `a\*b\?c\[d\]e\\f`; got != want {
		t.Errorf("globEscape = %q, want %q", got, want)
	}
}

func TestValidIdent(t *testing.T) {
	for s, want := range map[string]bool{"reservebench_1f3a9c0d": true, "": false, "1abc": false, "a-b": false, "A": false} {
		if got := validIdent(s); got != want {
			t.Errorf("validIdent(%q) = %v, want %v", s, got, want)
		}
	}
}
