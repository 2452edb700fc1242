package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// demoCommitment is the seed_sha256 of testdata/verified.json's seed.
const demoCommitment = "903364744a10ed7e9ee8067f80a79e92faed8a19c3ce5bc2432b469a940ca229"

// TestRun: the command's flags, verdicts and exit codes, on files and on
// URLs: 0 for a log that verifies, 1 for one that does not, 2 when it
// cannot run.
func TestRun(t *testing.T) {
	verified, err := os.ReadFile(filepath.Join("testdata", "verified.json"))
	if err != nil {
		t.Fatal(err)
	}
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sales/demo/admission-log" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(verified)
			return
		}
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":"sale_not_over","message":"The sale has not ended; its admission log is published at its end."}`))
	}))
	t.Cleanup(edge.Close)
	notJSON := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(notJSON, []byte("<html>"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out      []string // in stdout, in order
		notInOut string
	}{
		{"verified, without the commitment", []string{"-log", "testdata/verified.json"}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn by the revealed seed, which matches the log's own commitment (seed SHA-256 " + demoCommitment + ") for the start at 2030-01-01 12:00:00 UTC; 3 later places behind them; 6 of 8 admitted in place order, the last at 2030-01-01T12:00:01.000Z.",
			"Note: the seed was compared only with the log's own claim."}, ""},
		{"verified as committed", []string{"-log", "testdata/verified.json", "-seed-sha256", strings.ToUpper(demoCommitment)}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn as committed (seed SHA-256 " + demoCommitment + ", the commitment you recorded)"}, "Note:"},
		{"another commitment", []string{"-log", "testdata/verified.json", "-seed-sha256", strings.Repeat("ab", 32)}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 1 problem:",
			"  - the revealed seed hashes to " + demoCommitment + ", not to the commitment " + strings.Repeat("ab", 32) + " published before the start"}, "VERIFIED"},
		{"two places swapped", []string{"-log", "testdata/tampered.json", "-seed-sha256", demoCommitment}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 2 problems:",
			"  - place 1: pre_index 3 is drawn to place 2, not 1",
			"  - place 2: pre_index 4 is drawn to place 1, not 2"}, ""},
		{"an account's entry", []string{"-log", "testdata/verified.json", "-account", "alice"}, exitVerified, []string{
			"VERIFIED:", "Account alice (account_sha256 703b510aec1af8ebf7a0e10ecada4ca74056d5b282613d09f11bf4b5290cf6d4): pre-queue join #1, drawn to place 3 of 5; admitted at 2030-01-01T12:00:00.500Z."}, ""},
		{"a later account never admitted", []string{"-log", "testdata/verified.json", "-account", "heidi"}, exitVerified, []string{
			"Account heidi (account_sha256 3cf3bede65eee85646af15df830c62da70e37d661ccad39e3b522a5856176429): joined after the start, place 8; never admitted."}, ""},
		{"an account not in the log", []string{"-log", "testdata/verified.json", "-account", "mallory"}, exitVerified, []string{
			"Account mallory (account_sha256 ", "): no place in this log."}, ""},
		{"fetched from the edge", []string{"-log", edge.URL + "/v1/sales/demo/admission-log", "-seed-sha256", demoCommitment}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn as committed"}, ""},
		{"an edge refusing", []string{"-log", edge.URL + "/v1/sales/open/admission-log"}, exitUnable, nil, "VERIFIED"},
		{"no log", []string{"-account", "alice"}, exitUnable, nil, "VERIFIED"},
		{"a commitment that is no hash", []string{"-log", "testdata/verified.json", "-seed-sha256", "abc"}, exitUnable, nil, "VERIFIED"},
		{"an unknown flag", []string{"-log", "testdata/verified.json", "-seed", "x"}, exitUnable, nil, "VERIFIED"},
		{"an argument too many", []string{"-log", "testdata/verified.json", "extra"}, exitUnable, nil, "VERIFIED"},
		{"a missing file", []string{"-log", "testdata/none.json"}, exitUnable, nil, "VERIFIED"},
		{"not a log", []string{"-log", notJSON}, exitUnable, nil, "VERIFIED"},
		{"help", []string{"-h"}, exitVerified, nil, "VERIFIED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, &stdout, &stderr)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("run(%q) = %v, exit %d; want exit %d\nstdout: %s\nstderr: %s", tc.args, err, got, tc.code, stdout.String(), stderr.String())
			}
			rest := stdout.String()
			for _, want := range tc.out {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("run(%q) printed:\n%s\nwant, after what came before:\n%s", tc.args, stdout.String(), want)
				}
				rest = rest[i+len(want):]
			}
			if tc.notInOut != "" && strings.Contains(stdout.String(), tc.notInOut) {
				t.Errorf("run(%q) printed:\n%s\nwant no %q", tc.args, stdout.String(), tc.notInOut)
			}
		})
	}
}
