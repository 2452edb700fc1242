// redis-benchmark run with a command line of our own, its figures read, so
// the Go client's throughput can be set beside what Redis itself reaches
// with the same command.

package reserveperf

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// RedisBenchmarkOptions are redis-benchmark's flags.
type RedisBenchmarkOptions struct {
	// Binary is the redis-benchmark executable; "" means "redis-benchmark" on PATH.
	Binary string
	// Requests is -n: how many commands in all.
	Requests int
	// Clients is -c: parallel connections.
	Clients int
	// Pipeline is -P: commands per pipeline on each connection.
	Pipeline int
	// KeySpace is -r: __rand_int__ is replaced, at each occurrence
	// independently, by a 12-digit number below KeySpace.
	KeySpace int
}

// redisBenchmarkResult is redis-benchmark's --csv line for one command.
type redisBenchmarkResult struct {
	Args      []string // the whole command line, for the report
	PerSecond float64  // requests per second
	AvgMillis float64
	P50Millis float64
	P99Millis float64
	MaxMillis float64
	Elapsed   time.Duration // wall time of the whole redis-benchmark process
	CPU       time.Duration // redis-benchmark's own CPU time, user and system
}

// execRedisBenchmark runs command against the Redis of redisURL (host, port, password,
// user and database number are taken from it) and parses the result.
func execRedisBenchmark(ctx context.Context, redisURL string, opts RedisBenchmarkOptions, command ...string) (redisBenchmarkResult, error) {
	conn, err := connArgs(redisURL)
	if err != nil {
		return redisBenchmarkResult{}, err
	}
	bin := opts.Binary
	if bin == "" {
		bin = "redis-benchmark"
	}
	args := append(conn,
		"-n", strconv.Itoa(opts.Requests),
		"-c", strconv.Itoa(opts.Clients),
		"-P", strconv.Itoa(opts.Pipeline),
		"-r", strconv.Itoa(opts.KeySpace),
		"--csv")
	args = append(args, command...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return redisBenchmarkResult{}, fmt.Errorf("redis-benchmark: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	res, err := parseCSV(stdout.Bytes())
	if err != nil {
		return redisBenchmarkResult{}, fmt.Errorf("redis-benchmark: %w (stdout %q, stderr %q)", err, stdout.String(), stderr.String())
	}
	res.Elapsed = time.Since(start)
	res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	res.Args = append([]string{bin}, redact(args)...)
	return res, nil
}

// connArgs turns a redis:// URL into redis-benchmark's -h -p -a --user --dbnum.
func connArgs(redisURL string) ([]string, error) {
	u, err := url.Parse(redisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	if u.Scheme != "redis" {
		return nil, fmt.Errorf("redis url: scheme %q: redis-benchmark is run only over plain redis://", u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "6379"
	}
	args := []string{"-h", host, "-p", port}
	if u.User != nil {
		if pass, ok := u.User.Password(); ok {
			if name := u.User.Username(); name != "" && name != "default" {
				args = append(args, "--user", name)
			}
			args = append(args, "-a", pass)
		}
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if _, err := strconv.Atoi(db); err != nil {
			return nil, fmt.Errorf("redis url: database %q is not a number", db)
		}
		args = append(args, "--dbnum", db)
	}
	if net.ParseIP(host) == nil && host != "localhost" {
		return nil, fmt.Errorf("redis url: host %q: use an IP address or localhost", host)
	}
	return args, nil
}

// redact hides the value of -a.
func redact(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-a" {
			out[i+1] = "***"
		}
	}
	return out
}

// parseCSV reads the header and the one result line of --csv output.
func parseCSV(out []byte) (redisBenchmarkResult, error) {
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return redisBenchmarkResult{}, fmt.Errorf("read csv: %w", err)
	}
	if len(rows) != 2 {
		return redisBenchmarkResult{}, fmt.Errorf("want a header and one result line, got %d lines", len(rows))
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	num := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok || i >= len(rows[1]) {
			return 0, fmt.Errorf("no %s column", name)
		}
		return strconv.ParseFloat(rows[1][i], 64)
	}
	var res redisBenchmarkResult
	var errs []error
	for _, f := range []struct {
		name string
		to   *float64
	}{
		{"rps", &res.PerSecond}, {"avg_latency_ms", &res.AvgMillis}, {"p50_latency_ms", &res.P50Millis},
		{"p99_latency_ms", &res.P99Millis}, {"max_latency_ms", &res.MaxMillis},
	} {
		v, err := num(f.name)
		errs = append(errs, err)
		*f.to = v
	}
	if err := errors.Join(errs...); err != nil {
		return redisBenchmarkResult{}, err
	}
	if res.PerSecond <= 0 {
		return redisBenchmarkResult{}, errors.New("rps is not positive: did every command fail?")
	}
	return res, nil
}
