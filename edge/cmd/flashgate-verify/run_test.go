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
// URLs: 0 for a log that verifies, 1 for one that does not (or holds the
// account asked about elsewhere than given, or not at all), 2 when it
// cannot run. testdata/swapped.json is verified.json with alice's entry
// given to mallory (whose own entry, at place 9, is gone): it verifies,
// but not for alice.
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
			"VERIFIED: 5 pre-queue places drawn by the revealed seed, which matches the log's own commitment (seed SHA-256 " + demoCommitment + ") for the start at 2030-01-01 12:00:00 UTC; 3 later places behind them; the admission cursor reached 6 of 8 in place order, the last at 2030-01-01T12:00:01.000Z.",
			"Note: the seed was compared only with the log's own claim.",
			"Note: the draw's size n = 5 was taken from the log. Pass -pre-queue"}, ""},
		{"verified as committed", []string{"-log", "testdata/verified.json", "-seed-sha256", strings.ToUpper(demoCommitment)}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn as committed (seed SHA-256 " + demoCommitment + ", the commitment you recorded) for the start",
			"Note: the draw's size n = 5 was taken from the log."}, "Note: the seed"},
		{"verified as committed and drawn", []string{"-log", "testdata/verified.json", "-seed-sha256", demoCommitment, "-pre-queue", "5", "-starts-at", "2030-01-01T12:00:00Z"}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn as committed (seed SHA-256 " + demoCommitment + ", the commitment you recorded; n = 5, the size you recorded) for the start at 2030-01-01 12:00:00 UTC;"}, "Note:"},
		{"another commitment", []string{"-log", "testdata/verified.json", "-seed-sha256", strings.Repeat("ab", 32)}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 1 problem:",
			"  - the revealed seed hashes to " + demoCommitment + ", not to the commitment " + strings.Repeat("ab", 32) + " published before the start"}, "VERIFIED"},
		{"another draw size", []string{"-log", "testdata/verified.json", "-seed-sha256", demoCommitment, "-pre-queue", "6"}, exitFailed, []string{
			"FAILED: the admission log of sale demo has ",
			"  - the log's draw has pre_queue 5, not the 6 the sale published after the draw"}, "VERIFIED"},
		{"another start", []string{"-log", "testdata/verified.json", "-starts-at", "2030-01-01T11:00:00Z"}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 1 problem:",
			"  - the log's starts_at is 2030-01-01T12:00:00.000Z, not the 2030-01-01T11:00:00.000Z the sale published"}, "VERIFIED"},
		{"an entry given to another account", []string{"-log", "testdata/swapped.json", "-seed-sha256", demoCommitment, "-pre-queue", "5"}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn as committed"}, ""},
		{"two places swapped", []string{"-log", "testdata/tampered.json", "-seed-sha256", demoCommitment}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 2 problems:",
			"  - place 1: pre_index 3 is drawn to place 2, not 1",
			"  - place 2: pre_index 4 is drawn to place 1, not 2"}, ""},
		{"an account's entry", []string{"-log", "testdata/verified.json", "-account", "alice"}, exitVerified, []string{
			"VERIFIED:", "Account alice (account_sha256 703b510aec1af8ebf7a0e10ecada4ca74056d5b282613d09f11bf4b5290cf6d4): pre-queue join #1, drawn to place 3 of 5; the cursor reached it at 2030-01-01T12:00:00.500Z.",
			"Note: to check that this entry is the one you were given, pass -place"}, ""},
		{"an account's entry as given", []string{"-log", "testdata/verified.json", "-account", "alice", "-pre-index", "1", "-place", "3"}, exitVerified, []string{
			"VERIFIED:", "Account alice (account_sha256 703b510aec1af8ebf7a0e10ecada4ca74056d5b282613d09f11bf4b5290cf6d4): pre-queue join #1, drawn to place 3 of 5;",
			"It holds the pre-queue index and the place you gave."}, "Note: to check"},
		{"a later account never reached", []string{"-log", "testdata/verified.json", "-account", "heidi", "-place", "8"}, exitVerified, []string{
			"Account heidi (account_sha256 3cf3bede65eee85646af15df830c62da70e37d661ccad39e3b522a5856176429): joined after the start, place 8; the cursor never reached it.",
			"It holds the place you gave."}, "Note: to check"},
		{"an account not in the log", []string{"-log", "testdata/verified.json", "-account", "mallory"}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 1 problem:",
			"  - account mallory (account_sha256 030dec8571a3ca8b8496cf71502271dd9ff49d08d3ef15c88de13d3b1db5b062): this account has no place in the log"}, "VERIFIED"},
		{"an account given another's entry", []string{"-log", "testdata/swapped.json", "-seed-sha256", demoCommitment, "-account", "alice"}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 1 problem:",
			"  - account alice (account_sha256 703b510aec1af8ebf7a0e10ecada4ca74056d5b282613d09f11bf4b5290cf6d4): this account has no place in the log\n"}, "VERIFIED"},
		{"an account given another's entry, its index given", []string{"-log", "testdata/swapped.json", "-account", "alice", "-pre-index", "1"}, exitFailed, []string{
			"  - account alice (account_sha256 703b510aec1af8ebf7a0e10ecada4ca74056d5b282613d09f11bf4b5290cf6d4): this account has no place in the log; the log gives pre-queue index 1 to account_sha256 030dec8571a3…"}, "VERIFIED"},
		{"another pre-queue index", []string{"-log", "testdata/verified.json", "-account", "alice", "-pre-index", "2"}, exitFailed, []string{
			"FAILED: the admission log of sale demo has 1 problem:",
			"  - account alice holds pre-queue index 1, not 2 as you gave; the log gives pre-queue index 2 to account_sha256 7c467465fee0…",
			"Account alice (account_sha256 703b510aec1af8ebf7a0e10ecada4ca74056d5b282613d09f11bf4b5290cf6d4): pre-queue join #1"}, "It holds"},
		{"a pre-queue index for a later join", []string{"-log", "testdata/verified.json", "-account", "heidi", "-pre-index", "3"}, exitFailed, []string{
			"  - account heidi holds place 8 as a join after the start, not pre-queue index 3 as you gave; the log gives pre-queue index 3 to account_sha256 d2dcb40ae0b2…"}, "VERIFIED"},
		{"another place", []string{"-log", "testdata/verified.json", "-account", "heidi", "-place", "7"}, exitFailed, []string{
			"  - account heidi is at place 8 in the log, not 7 as you gave; the log gives place 7 to account_sha256 4405a6fadb13…"}, "VERIFIED"},
		{"fetched from the edge", []string{"-log", edge.URL + "/v1/sales/demo/admission-log", "-seed-sha256", demoCommitment}, exitVerified, []string{
			"VERIFIED: 5 pre-queue places drawn as committed"}, ""},
		{"an edge refusing", []string{"-log", edge.URL + "/v1/sales/open/admission-log"}, exitUnable, nil, "VERIFIED"},
		{"no log", []string{"-account", "alice"}, exitUnable, nil, "VERIFIED"},
		{"a commitment that is no hash", []string{"-log", "testdata/verified.json", "-seed-sha256", "abc"}, exitUnable, nil, "VERIFIED"},
		{"a draw size that is no count", []string{"-log", "testdata/verified.json", "-pre-queue", "-1"}, exitUnable, nil, "VERIFIED"},
		{"a start that is no time", []string{"-log", "testdata/verified.json", "-starts-at", "noon"}, exitUnable, nil, "VERIFIED"},
		{"a pre-queue index without an account", []string{"-log", "testdata/verified.json", "-pre-index", "1"}, exitUnable, nil, "VERIFIED"},
		{"a place without an account", []string{"-log", "testdata/verified.json", "-place", "3"}, exitUnable, nil, "VERIFIED"},
		{"a place below 1", []string{"-log", "testdata/verified.json", "-account", "alice", "-place", "-3"}, exitUnable, nil, "VERIFIED"},
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
