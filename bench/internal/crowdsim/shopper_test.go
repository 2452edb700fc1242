package crowdsim

import (
	"reflect"
	"testing"
)

// readQueueAnswer reads every field the shopper acts on, tells a final
// false from an absent one, and reads a body that is not JSON as nothing.
func TestReadQueueAnswer(t *testing.T) {
	no, yes := false, true
	for _, tt := range []struct {
		body string
		want queueAnswer
	}{
		{`{"queue_token":"qt","position":4242,"poll_after_ms":1500,"state":"waiting"}`,
			queueAnswer{QueueToken: "qt", Position: 4242, PollAfterMS: 1500, State: "waiting"}},
		{`{"state":"admitted","admission_token":"at.x.y","position":7}`,
			queueAnswer{State: "admitted", AdmissionToken: "at.x.y", Position: 7}},
		{`{"state":"sold_out","final":false}`, queueAnswer{State: "sold_out", Final: &no}},
		{`{"error":"sold_out","final":true}`, queueAnswer{Error: "sold_out", Final: &yes}},
		{`{"error":"challenge_required","message":"…","request_id":"r","challenge":"v1.k1.s.1.8.n.m","difficulty_bits":8}`,
			queueAnswer{Error: "challenge_required", Challenge: "v1.k1.s.1.8.n.m", DifficultyBits: 8}},
		{`please wait`, queueAnswer{}},
		{``, queueAnswer{}},
	} {
		if got := readQueueAnswer([]byte(tt.body)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("readQueueAnswer(%s) = %+v, want %+v", tt.body, got, tt.want)
		}
	}
}
