package payment

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVerifySignature(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	current, old, stranger := []byte("whsec-current"), []byte("whsec-old"), []byte("whsec-stranger")
	ours := [][]byte{current, old}

	tests := []struct {
		name   string
		header string
		body   []byte
		want   error
	}{
		{"signed now", Sign(body, now, current), body, nil},
		{"signed with the old secret (rotation)", Sign(body, now, old), body, nil},
		{"signed with both", Sign(body, now, stranger, current), body, nil},
		{"4 minutes old", Sign(body, now.Add(-4*time.Minute), current), body, nil},
		{"unknown secret", Sign(body, now, stranger), body, ErrBadSignature},
		{"body changed after signing", Sign(body, now, current), []byte(`{"id":"evt_2","type":"payment_intent.succeeded"}`), ErrBadSignature},
		{"6 minutes old (a replay)", Sign(body, now.Add(-6*time.Minute), current), body, ErrStaleSignature},
		{"6 minutes ahead", Sign(body, now.Add(6*time.Minute), current), body, ErrStaleSignature},
		{"time moved forward, signature kept", strings.Replace(Sign(body, now.Add(-6*time.Minute), current),
			"t="+itoa(now.Add(-6*time.Minute).Unix()), "t="+itoa(now.Unix()), 1), body, ErrBadSignature},
		{"empty", "", body, ErrBadSignature},
		{"no time", strings.SplitN(Sign(body, now, current), ",", 2)[1], body, ErrBadSignature},
		{"no v1", "t=" + itoa(now.Unix()), body, ErrBadSignature},
		{"v1 not hex", "t=" + itoa(now.Unix()) + ",v1=zz", body, ErrBadSignature},
		{"v0 scheme only", strings.Replace(Sign(body, now, current), "v1=", "v0=", 1), body, ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifySignature(tt.header, tt.body, ours, now, DefaultTolerance)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("VerifySignature(%q) = %v, want %v", tt.header, err, tt.want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestParseEvent(t *testing.T) {
	good := `{"id":"evt_1","type":"payment_intent.succeeded","created_at":"2026-11-30T12:00:00Z",
		"data":{"intent":{"intent_id":"pi_1","status":"succeeded","amount_minor":4999,"currency":"INR",
		"metadata":{"order_id":"o_1"},"refunds":[],"payer":"upi:alice@okbank"},"extra":1},"livemode":false}`
	e, err := ParseEvent([]byte(good))
	if err != nil {
		t.Fatalf("ParseEvent(good) = %v", err)
	}
	if e.ID != "evt_1" || e.Data.Intent.OrderID() != "o_1" || e.Data.Intent.AmountMinor != 4999 || e.Data.Intent.Payer != "upi:alice@okbank" {
		t.Errorf("ParseEvent(good) = %+v", e)
	}
	// What an event needs beyond its id and type depends on the type.
	if _, err := ParseEvent([]byte(`{"id":"evt","type":"payout.paid","data":{}}`)); err != nil {
		t.Errorf("ParseEvent(another type, no intent) = %v, want nil", err)
	}
	for _, bad := range []string{
		``, `[]`, `{"id":"evt_1"}`, `{"id":"","type":"x","data":{"intent":{"intent_id":"pi"}}}`,
		`{"id":1,"type":"x"}`, `{"id":"` + strings.Repeat("e", 129) + `","type":"x","data":{"intent":{"intent_id":"pi"}}}`,
	} {
		if _, err := ParseEvent([]byte(bad)); !errors.Is(err, ErrBadEvent) {
			t.Errorf("ParseEvent(%q) = %v, want ErrBadEvent", bad, err)
		}
	}
}
