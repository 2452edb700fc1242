package edgeperf

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
)

func TestMeanDigits(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64
	}{
		{0, 0}, {1, 1}, {9, 1}, {10, 1.1}, {100, 1.92}, {1_000_000, 5.888896},
	} {
		if got := meanDigits(tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("meanDigits(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestHashModel(t *testing.T) {
	for _, tc := range []struct {
		name               string
		n                  int
		field, value       float64
		wantField, wantVal float64
		wantBuckets        float64
	}{
		// 14-character ids: sdshdr5, 1 + 14 + 1 = 16; 6 digits: 8.
		{"million", 1_000_000, 14, 5.9, 16, 8, 8 * 1048576 / 1e6},
		{"ten thousand", 10_000, 14, 4, 16, 8, 8 * 16384 / 1e4},
		// 36-character UUIDs: sdshdr8, 3 + 36 + 1 = 40.
		{"uuid ids", 1_000_000, 36, 7, 40, 16, 8 * 1048576 / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := hashModel(tc.n, tc.field, tc.value)
			if m.Field != tc.wantField || m.Value != tc.wantVal || math.Abs(m.Buckets-tc.wantBuckets) > 1e-9 {
				t.Errorf("hashModel(%d, %v, %v) = %+v, want field %v, value %v, buckets %v", tc.n, tc.field, tc.value, m, tc.wantField, tc.wantVal, tc.wantBuckets)
			}
			if want := 24 + m.Field + m.Value + m.Buckets; m.Total != want {
				t.Errorf("Total = %v, want %v", m.Total, want)
			}
		})
	}
}

func TestAccountIsFourteenCharacters(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range []int{groupLine, groupPoll, groupJoin, groupSoldOut, groupProxied, groupOrigin} {
		for _, i := range []int{0, 1, 99_999_999} {
			a := account(g, i)
			if len(a) != 14 || !strings.HasPrefix(a, "user-") {
				t.Errorf("account(%d, %d) = %q, want user- and 9 digits", g, i, a)
			}
			if seen[a] {
				t.Errorf("account(%d, %d) = %q twice", g, i, a)
			}
			seen[a] = true
		}
	}
}

func validConfig() Config {
	return Config{
		RedisURL: "redis://127.0.0.1:6379/0", PostgresURL: "postgres://postgres@127.0.0.1:5432/x",
		Paths:    map[string]bool{PathStatus: true, PathMemory: true},
		Requests: 10, ProxyRequests: 10, Conns: 1, Warmup: 0, Rounds: 1, PollLine: 10, PollAdmitted: 0.2,
		MemSizes: []int{10, 100}, MemPolls: 10, FillWorkers: 1, Limits: LimitsProduction, Timeout: time.Minute,
	}
}

func TestValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"no paths", func(c *Config) { c.Paths = nil }},
		{"unknown path", func(c *Config) { c.Paths["nope"] = true }},
		{"no requests", func(c *Config) { c.Requests = 0 }},
		{"admitted above 1", func(c *Config) { c.PollAdmitted = 1.5 }},
		{"sizes descending", func(c *Config) { c.MemSizes = []int{100, 10} }},
		{"stock beyond the cap", func(c *Config) { c.ProxyRequests = 6_000_000 }},
		{"unknown limits", func(c *Config) { c.Limits = "some" }},
		{"remote redis", func(c *Config) { c.RedisURL = "redis://10.0.0.1:6379/0" }},
		{"no time", func(c *Config) { c.Timeout = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.change(&c)
			if err := c.Validate(); err == nil {
				t.Errorf("Validate() = nil, want an error")
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	run := func(server string, rate float64) ServerRun {
		return ServerRun{Server: server, Timing: benchreport.Timing{Calls: 10, PerSecond: rate, Answers: map[string]int{"200": 10}}, Ratio: rate / 100}
	}
	rep := Report{
		Settings: Settings{Rounds: 1},
		Paths: []*Path{{Name: "status poll", Request: "GET /x", Expect: 200, Goal: StatusGoal, Ratio: 0.5,
			Rounds: []Round{{Round: 1, Runs: []ServerRun{run("bare", 100), run("edge", 50)}}}}},
		Memory: &Memory{HeapGoal: HeapGoal, RedisGoal: RedisGoal, HeapRatio: 1.02,
			Sizes: []MemSize{{Shoppers: 10, Redis: RedisLine{PerShopper: 60}}, {Shoppers: 100, Redis: RedisLine{PerShopper: 120}}}},
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"goal >= 0.80: NOT met", "(goal flat, <= 1.10: met)", "at 10: 60.0 (goal <= 100: met)", "at 100: 120.0 (goal <= 100: NOT met)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteTable lacks %q:\n%s", want, b.String())
		}
	}
}
