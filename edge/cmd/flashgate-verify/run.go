package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The exit codes.
const (
	exitVerified = 0
	exitFailed   = 1 // the log does not verify
	exitUnable   = 2 // bad flags, or a log that cannot be fetched or read
)

// errFailed: the log was read and does not verify (the verdict says why).
var errFailed = errors.New("the admission log does not verify")

// errUsage: the flags are wrong (the usage was printed).
var errUsage = errors.New("usage")

// exitCode is the process's exit code after run returned err.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitVerified
	case errors.Is(err, errFailed):
		return exitFailed
	default:
		return exitUnable
	}
}

// run reads the log the flags name, checks it against what the flags say
// the reader recorded, and writes the verdict (with the account's entry)
// to stdout; the usage goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var exp Expect
	fs := flag.NewFlagSet("flashgate-verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	src := fs.String("log", "", "the admission log: an http(s) URL (the edge's /v1/sales/{sale_id}/admission-log) or a file, - for stdin")
	commitment := fs.String("seed-sha256", "", "the draw.seed_sha256 the sale's snapshot published before its start, as you recorded it (64 hex digits)")
	fs.Func("pre-queue", "the draw.pre_queue the sale's snapshot published after its start, as you recorded it: the draw's size n", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a count of places, 0 or more")
		}
		exp.PreQueue, exp.HasPreQueue = n, true
		return nil
	})
	fs.Func("starts-at", "the sale's starts_at as its snapshot published it (RFC 3339)", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf("want a time like 2030-01-01T12:00:00Z")
		}
		exp.StartsAt = t
		return nil
	})
	fs.StringVar(&exp.Account, "account", "", "an account id: its entry (hashed with the log's salt) must be in the log")
	fs.Int64Var(&exp.PreIndex, "pre-index", 0, "with -account: the account's pre-queue index, the pos its queue token carries")
	fs.Int64Var(&exp.Place, "place", 0, "with -account: the account's place, as its page showed it")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long fetching a URL may take")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flashgate-verify -log URL-or-file [-seed-sha256 HEX] [-pre-queue N] [-starts-at TIME] [-account NAME [-pre-index I] [-place P]]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case *src == "":
		fs.Usage()
		return fmt.Errorf("%w: -log is required", errUsage)
	case fs.NArg() > 0:
		fs.Usage()
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case *commitment != "" && !isHash(*commitment):
		return fmt.Errorf("%w: -seed-sha256 must be 64 hex digits, got %q", errUsage, *commitment)
	case exp.PreIndex < 0 || exp.Place < 0:
		return fmt.Errorf("%w: -pre-index and -place count from 1", errUsage)
	case exp.Account == "" && (exp.PreIndex > 0 || exp.Place > 0):
		return fmt.Errorf("%w: -pre-index and -place check the entry of an -account", errUsage)
	}
	exp.SeedSHA256 = strings.ToLower(*commitment)
	l, err := load(ctx, *src, *timeout)
	if err != nil {
		return err
	}
	v := Check(l, exp)
	v.Print(stdout)
	if !v.OK() {
		return errFailed
	}
	return nil
}

// isHash reports whether s is a SHA-256 in hex.
func isHash(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// load reads the log at src: a URL, a file, or - for stdin.
func load(ctx context.Context, src string, timeout time.Duration) (*Log, error) {
	if src == "-" {
		return Decode(os.Stdin)
	}
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return Decode(f)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
		return nil, fmt.Errorf("fetch %s: %s: %s", src, res.Status, strings.TrimSpace(string(body)))
	}
	return Decode(res.Body)
}
