package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestAppendQueueAnswerMatchesJSON(t *testing.T) {
	yes, no := true, false
	strs := []string{"", "waiting", "eyJhbGciOiJIUzI1NiJ9.e30.abc-_", `a"b`, `a\b`, "a<b>&", "é", "\x00\x1f\x7f", "\xff", "\u2028"}
	ints := []int64{0, 1, -1, 42, 1 << 40, -1 << 63, 1<<63 - 1}
	n := 0
	for _, state := range strs {
		for _, tok := range strs {
			for _, final := range []*bool{nil, &yes, &no} {
				n++
				a := queueAnswer{
					State: state, QueueToken: tok, AdmissionToken: strs[n%len(strs)],
					Position: ints[n%len(ints)], NowServing: ints[(n+1)%len(ints)],
					EstimatedWaitS: ints[(n+2)%len(ints)], PollAfterMS: ints[(n+3)%len(ints)],
					PreQueue: n%2 == 0, Paused: n%3 == 0, Final: final,
				}
				want, err := json.Marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				if got := appendQueueAnswer(nil, &a); string(got) != string(want) {
					t.Errorf("appendQueueAnswer(%+v) = %s, want %s", a, got, want)
				}
			}
		}
	}
}

func TestSplitPath(t *testing.T) {
	for _, p := range []string{"", "a", "a/b", "v1/sales/s1/queue/status", "a//b", "/", "a/", "/a", strings.Repeat("x/", 20)} {
		if got, want := splitPath(p, nil), strings.Split(p, "/"); !slices.Equal(got, want) {
			t.Errorf("splitPath(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestWriteQueueAnswerAllocs(t *testing.T) {
	a := queueAnswer{State: "waiting", Position: 1234, NowServing: 1000, EstimatedWaitS: 3, PollAfterMS: 1000}
	if n := testing.AllocsPerRun(100, func() { _ = appendQueueAnswer(make([]byte, 0, answerBufLen), &a) }); n > 1 {
		t.Errorf("appendQueueAnswer allocs = %v, want at most the buffer", n)
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern []string
		path    string
		params  []string
		ok      bool
	}{
		{[]string{"v1", "sales", "*"}, "v1/sales/s1", []string{"s1"}, true},
		{[]string{"v1", "sales", "*"}, "v1/sales/s1/queue", nil, false},
		{[]string{"v1", "sales", "*"}, "v1/sales/", nil, false},
		{[]string{"v1", "sales", "*"}, "v1/sales", nil, false},
		{[]string{"v1", "sales", "*", "queue", "status"}, "v1/sales/s1/queue/status", []string{"s1"}, true},
		{[]string{"v1", "sales", "*", "queue", "status"}, "v1/sales/s1/queue/statu", nil, false},
		{[]string{"static", "**"}, "static/a/b.css", []string{"a/b.css"}, true},
		{[]string{"static", "**"}, "static", nil, false},
		{[]string{""}, "", nil, true},
		{[]string{""}, "x", nil, false},
	}
	for _, tt := range tests {
		params, ok := matchPath(tt.pattern, strings.Split(tt.path, "/"))
		if ok != tt.ok || (ok && !slices.Equal(params, tt.params)) {
			t.Errorf("matchPath(%q, %q) = %q, %v; want %q, %v", tt.pattern, tt.path, params, ok, tt.params, tt.ok)
		}
	}
}
