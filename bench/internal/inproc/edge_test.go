package inproc

import "testing"

func TestCountersBetween(t *testing.T) {
	got := CountersBetween(map[string]float64{"poll waiting": 5, "joined": 2}, map[string]float64{"poll waiting": 9, "joined": 2, "poll admitted": 3})
	if len(got) != 2 || got["poll waiting"] != 4 || got["poll admitted"] != 3 {
		t.Errorf("CountersBetween = %v, want poll waiting 4, poll admitted 3", got)
	}
}
