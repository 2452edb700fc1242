package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/reserveperf"
)

func TestLoadConfigPhases(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		args           []string
		script, http   bool
		peers          bool
		durability     []string
		wantErrContain string
	}{
		{args: nil, script: true, http: true, peers: true, durability: reserveperf.DurabilityOptions},
		{args: []string{"-run", "script"}, script: true},
		{args: []string{"-run", "peers"}, peers: true},
		{args: []string{"-run", "peers", "-peer-units", "2000", "-peer-accounts", "1000"}, wantErrContain: "peer accounts must be at least the peer units"},
		{args: []string{"-run", "durability", "-durability", "none, wait"}, durability: []string{"none", "wait"}},
		{args: []string{"-run", "http,durability", "-durability", "journal"}, http: true, durability: []string{"journal"}},
		{args: []string{"-run", "durability", "-durability", "fsync"}, wantErrContain: `durability option "fsync"`},
		{args: []string{"-run", "disk"}, wantErrContain: "want some of script, durability, http, peers"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, _, err := loadConfig(tc.args, none, io.Discard)
			if tc.wantErrContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContain) {
					t.Fatalf("loadConfig(%q) error = %v, want one containing %q", tc.args, err, tc.wantErrContain)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig(%q): %v", tc.args, err)
			}
			if c.Script != tc.script || c.HTTP != tc.http || c.Peers != tc.peers || !slices.Equal(c.Durability, tc.durability) {
				t.Errorf("loadConfig(%q) = script %v, http %v, peers %v, durability %v; want %v, %v, %v, %v",
					tc.args, c.Script, c.HTTP, c.Peers, c.Durability, tc.script, tc.http, tc.peers, tc.durability)
			}
			if c.PeerUnits != 1_000 || c.PeerAccounts != 20_000 || c.PeerConns != 200 {
				t.Errorf("loadConfig(%q) peer defaults: %d units, %d accounts, %d connections; want issue 31's 1000, 20000, 200",
					tc.args, c.PeerUnits, c.PeerAccounts, c.PeerConns)
			}
			if !c.HTTPNoJournal || c.DurabilityReserves != 50_000 || c.WaitTimeout <= 0 {
				t.Errorf("loadConfig(%q) defaults: http-no-journal %v, durability-n %d, wait timeout %s",
					tc.args, c.HTTPNoJournal, c.DurabilityReserves, c.WaitTimeout)
			}
		})
	}
}
