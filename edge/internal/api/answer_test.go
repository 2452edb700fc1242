package api

import (
	"encoding/json"
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

func TestWriteQueueAnswerAllocs(t *testing.T) {
	a := queueAnswer{State: "waiting", Position: 1234, NowServing: 1000, EstimatedWaitS: 3, PollAfterMS: 1000}
	if n := testing.AllocsPerRun(100, func() { _ = appendQueueAnswer(make([]byte, 0, answerBufLen), &a) }); n > 1 {
		t.Errorf("appendQueueAnswer allocs = %v, want at most the buffer", n)
	}
}
