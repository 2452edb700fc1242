package listenaddr_test

import (
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/listenaddr"
)

func TestDistinct(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		public, admin string
		clash         bool
	}{
		{":8080", ":8081", false},
		{":8080", ":8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{":8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "10.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"10.0.0.1:8080", "127.0.0.1:8080", false},
		{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", true},
		{"LocalHost:8080", "localhost:8080", true},
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"bad", "bad", true},
	} {
		err := listenaddr.Distinct(listenaddr.Listener{Name: "PUB", Addr: tc.public}, listenaddr.Listener{Name: "ADM", Addr: tc.admin})
		if (err != nil) != tc.clash {
			t.Errorf("Distinct(%q, %q) = %v, want clash %v", tc.public, tc.admin, err, tc.clash)
		}
		if err != nil && !strings.Contains(err.Error(), "PUB ("+tc.public+") and ADM ("+tc.admin+")") {
			t.Errorf("Distinct(%q, %q) = %v, want both named", tc.public, tc.admin, err)
		}
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:1": true, "[::1]:8080": true, "localhost:8080": true, "[::ffff:127.0.0.1]:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "shop.example:8080": false, "8080": false,
	} {
		if got := listenaddr.Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
	got := listenaddr.NotLoopback(listenaddr.Listener{Name: "A", Addr: "127.0.0.1:1"}, listenaddr.Listener{Name: "B", Addr: ":2"})
	if len(got) != 1 || got[0].Name != "B" {
		t.Errorf("NotLoopback = %v, want only B", got)
	}
}

// Dev mode is refused beyond loopback unless allowed, and then warned
// about; outside dev mode any address goes; a shared address never.
func TestCheck(t *testing.T) {
	t.Parallel()
	local := []listenaddr.Listener{{Name: "PUB", Addr: "127.0.0.1:8080"}, {Name: "ADM", Addr: "[::1]:8081"}}
	open := []listenaddr.Listener{{Name: "PUB", Addr: ":8080"}, {Name: "ADM", Addr: "127.0.0.1:8081"}}
	shared := []listenaddr.Listener{{Name: "PUB", Addr: "127.0.0.1:8080"}, {Name: "ADM", Addr: "127.0.0.1:8080"}}
	for _, tc := range []struct {
		name                 string
		dev, anyInterface    bool
		ls                   []listenaddr.Listener
		wantWarning, wantErr string // "" = none; else a part of it
	}{
		{name: "production, open", ls: open},
		{name: "dev, loopback", dev: true, ls: local},
		{name: "dev, open", dev: true, ls: open, wantErr: "dev mode listens on loopback addresses only (127.0.0.1:port), not PUB=:8080; set FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1"},
		{name: "dev, open, allowed", dev: true, anyInterface: true, ls: open, wantWarning: "DEV MODE LISTENS BEYOND LOOPBACK (FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1): PUB=:8080;"},
		{name: "allowed but not dev", anyInterface: true, ls: open},
		{name: "shared", ls: shared, wantErr: "PUB (127.0.0.1:8080) and ADM (127.0.0.1:8080) are one address"},
		{name: "shared, dev, allowed", dev: true, anyInterface: true, ls: shared, wantErr: "are one address"},
	} {
		warnings, err := listenaddr.Check(tc.dev, tc.anyInterface, tc.ls...)
		warning := strings.Join(warnings, "\n")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Check(%s) = %v, want an error with %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !strings.Contains(warning, tc.wantWarning) || (tc.wantWarning == "") != (warning == "") {
			t.Errorf("Check(%s) = %q, %v; want a warning with %q and no error", tc.name, warning, err, tc.wantWarning)
		}
	}
}
