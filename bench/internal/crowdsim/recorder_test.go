package crowdsim

import (
	"testing"
	"time"
)

// The timeline splits each second's requests by endpoint, with each
// endpoint's p99 over the ones answered, in the second they were sent.
func TestTimelineSplitsSecondsByEndpoint(t *testing.T) {
	zero := time.Now()
	r := newRecorder(zero)
	at := func(s float64) time.Time { return zero.Add(time.Duration(s * float64(time.Second))) }
	for i := range 100 {
		r.add(epJoin, at(0.5), time.Duration(i+1)*time.Millisecond, 202, answered)
	}
	r.add(epJoin, at(0.9), 0, 0, timedOut)
	r.add(epReserve, at(0.2), 300*time.Millisecond, 201, answered)
	r.add(epReserve, at(-0.5), 40*time.Millisecond, 201, answered)
	var res Result
	r.totals(&res, 0, 1)
	bySec := map[float64]Second{}
	for _, s := range res.Timeline {
		bySec[s.T] = s
	}
	zeroth := bySec[0].Endpoints
	if j := zeroth[epJoin]; j.Requests != 101 || j.P99Ms != 99 {
		t.Errorf("second 0 join = %+v, want 101 requests, p99 99 ms over the 100 answered", j)
	}
	if rs := zeroth[epReserve]; rs.Requests != 1 || rs.P99Ms != 300 {
		t.Errorf("second 0 reserve = %+v, want 1 request, p99 300 ms", rs)
	}
	if before := bySec[-1].Endpoints; len(before) != 1 || before[epReserve].Requests != 1 {
		t.Errorf("second -1 = %+v, want the one reserve sent before the open", before)
	}
}

// Each second of the timeline carries its last snapshot sample and the
// share of its samples that said sold out, seconds without a request too.
func TestTimelineCarriesTheSnapshotSamples(t *testing.T) {
	s := &sim{samples: []sample{
		{at: 200 * time.Millisecond, avail: 3},
		{at: 450 * time.Millisecond, avail: 0, soldOut: true},
		{at: 700 * time.Millisecond, avail: 1},
		{at: 950 * time.Millisecond, avail: 0, soldOut: true, nowServing: 42},
		{at: 2100 * time.Millisecond, avail: 0, soldOut: true},
	}}
	res := &Result{Timeline: []Second{{T: 0, Requests: 5}}}
	s.timeline(res)
	if len(res.Timeline) != 2 {
		t.Fatalf("timeline = %+v, want seconds 0 and 2", res.Timeline)
	}
	if got := res.Timeline[0]; got.Requests != 5 || got.SoldOut != 0.5 || got.NowServing != 42 || got.Available != 0 {
		t.Errorf("second 0 = %+v, want its 5 requests, sold out 0.5, the last sample's now_serving 42", got)
	}
	if got := res.Timeline[1]; got.T != 2 || got.SoldOut != 1 {
		t.Errorf("second 2 = %+v, want a second of its own, sold out 1", got)
	}
}
