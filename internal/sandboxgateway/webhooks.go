package sandboxgateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The event types of the flashgate protocol, one per state change; they
// are also the core's kinds of event (Event.Kind) in every personality.
const (
	EventPaymentSucceeded = "payment_intent.succeeded"
	EventPaymentFailed    = "payment_intent.failed"
	// EventRefundCreated is a refund created pending, while refunds are
	// held; a refund that succeeds at once sends EventRefundSucceeded
	// alone.
	EventRefundCreated   = "refund.created"
	EventRefundSucceeded = "refund.succeeded"
	EventRefundFailed    = "refund.failed"
)

// SignatureHeader carries Sign's value on every webhook.
const SignatureHeader = "Payment-Signature"

// userAgent identifies webhook deliveries.
const userAgent = "flashgate-sandbox-gateway/1"

// WebhookPayload is the body of every webhook of the flashgate protocol.
type WebhookPayload struct {
	ID        string      `json:"id"` // "evt_" + 24 hex digits; a duplicate delivery repeats it
	Type      string      `json:"type"`
	CreatedAt time.Time   `json:"created_at"`
	Data      WebhookData `json:"data"`
}

// WebhookData is what an event is about, as of the event.
type WebhookData struct {
	Intent Intent  `json:"intent"`
	Refund *Refund `json:"refund,omitempty"` // only for the refund.* events
}

// Event is the record of one event and its delivery attempts, as
// GET /sandbox/events shows it.
type Event struct {
	ID string `json:"event_id"`
	// Type is the event's type as the personality sends it
	// ("checkout.session.completed", say); Kind is the core's
	// (EventPaymentSucceeded, EventRefundCreated, ...), the same whatever
	// the personality. A personality may send several events of one
	// kind's state change (Stripe's refund.updated and refund.failed):
	// each is an Event of its own, with its own id.
	Type      string    `json:"type"`
	Kind      string    `json:"kind"`
	IntentID  string    `json:"intent_id"`
	CreatedAt time.Time `json:"created_at"`
	// Deliveries are the attempts so far, in order, duplicates included.
	Deliveries []Delivery `json:"deliveries"`
	// Delivered is set once an attempt got a 2xx answer.
	Delivered bool `json:"delivered"`
	// Suppressed events were recorded while webhooks were off, without a
	// webhook URL, or after Close, and are never sent.
	Suppressed bool `json:"suppressed"`
	// Payload is the exact body sent (or that would have been).
	Payload json.RawMessage `json:"payload"`
}

// Delivery is one POST of an event to the webhook URL.
type Delivery struct {
	Attempt    int       `json:"attempt"` // 1 for the first
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code"` // 0 when no answer came
	Error      string    `json:"error"`       // "" for a 2xx answer
	Duplicate  bool      `json:"duplicate,omitempty"`
}

// eventRecord is an Event and where it goes; Gateway.mu guards its Event's
// mutable fields, body is never changed.
type eventRecord struct {
	Event
	body []byte
	url  string
}

// Sign returns the Payment-Signature value of body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">", with one v1 entry
// per secret, in order.
func Sign(secrets []string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range secrets {
		m := hmac.New(sha256.New, []byte(s))
		m.Write([]byte(ts))
		m.Write([]byte("."))
		m.Write(body)
		b.WriteString(",v1=" + hex.EncodeToString(m.Sum(nil)))
	}
	return b.String()
}

// Events returns every event recorded, in order.
func (g *Gateway) Events() []Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Event, 0, len(g.events))
	for _, e := range g.events {
		c := e.Event
		c.Deliveries = slices.Clone(e.Deliveries)
		if c.Deliveries == nil {
			c.Deliveries = []Delivery{}
		}
		c.Payload = slices.Clone(e.Payload)
		out = append(out, c)
	}
	return out
}

// publishLocked records the webhooks the personality makes of core event
// ce (its ID is set here) and, unless webhooks are off, starts delivering
// each. g.mu must be held.
func (g *Gateway) publishLocked(ce coreEvent) {
	ce.ID = newID(eventPrefix)
	hooks, err := g.persona.encode(ce)
	if err != nil { // cannot happen: every field marshals
		g.log.Error("encode webhook", "kind", ce.Kind, "intent_id", ce.Intent.ID, "err", err)
		return
	}
	for _, h := range hooks {
		e := &eventRecord{
			Event: Event{ID: h.id, Type: h.typ, Kind: ce.Kind, IntentID: ce.Intent.ID, CreatedAt: ce.At, Payload: h.body},
			body:  h.body,
			url:   g.webhookURL,
		}
		g.events = append(g.events, e)
		if !g.webhooksOn || g.webhookURL == "" || g.closed {
			e.Suppressed = true
			g.log.Info("webhook suppressed", "event_id", h.id, "type", h.typ, "intent_id", ce.Intent.ID)
			continue
		}
		g.wg.Add(1) // under mu with closed false, so never after Close's Wait
		go g.deliver(e)
	}
}

// eventPrefix starts every event id, before 24 random hex digits.
const eventPrefix = "evt_"

// deliver sends e until an attempt gets a 2xx answer, MaxAttempts are
// spent, webhooks are switched off or Close starts; after a success it
// may send e once more (DuplicateRate).
func (g *Gateway) deliver(e *eventRecord) {
	defer g.wg.Done()
	for attempt := 1; ; attempt++ {
		if !g.sending() {
			return
		}
		if g.attempt(e, attempt, false) {
			if g.rnd.chance(g.cfg.DuplicateRate) && g.sending() {
				g.attempt(e, attempt+1, true)
			}
			return
		}
		if attempt >= g.cfg.MaxAttempts {
			g.log.Warn("webhook given up", "event_id", e.ID, "type", e.Type, "attempts", attempt)
			return
		}
		t := g.cfg.Clock.NewTimer(g.backoff(attempt))
		select {
		case <-g.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// sending reports whether deliveries may go on: webhooks are on and Close
// has not started.
func (g *Gateway) sending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.webhooksOn && !g.closed
}

// backoff is the wait after failed attempt n (1 for the first):
// RetryBase·2^(n-1) with ±20% jitter, at most RetryMax.
func (g *Gateway) backoff(n int) time.Duration {
	d := g.cfg.RetryBase
	for i := 1; i < n && d < g.cfg.RetryMax; i++ {
		d *= 2
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*g.rnd.float64()))
	return min(d, g.cfg.RetryMax)
}

// attempt POSTs e once, freshly signed, records the attempt and reports
// whether it got a 2xx answer.
func (g *Gateway) attempt(e *eventRecord, n int, duplicate bool) bool {
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.DeliveryTimeout)
	defer cancel()
	at := g.now()
	d := Delivery{Attempt: n, At: at, Duplicate: duplicate}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(e.body))
	if err == nil {
		g.persona.sign(req.Header, e.ID, g.cfg.WebhookSecrets, at, e.body)
		var resp *http.Response
		if resp, err = g.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
			_ = resp.Body.Close()
			d.StatusCode = resp.StatusCode
		}
	}
	ok := err == nil && d.StatusCode >= 200 && d.StatusCode < 300
	switch {
	case err != nil:
		d.Error = err.Error()
	case !ok:
		d.Error = fmt.Sprintf("answered %d", d.StatusCode)
	}

	g.mu.Lock()
	e.Deliveries = append(e.Deliveries, d)
	if ok {
		e.Delivered = true
	}
	g.mu.Unlock()
	if ok {
		g.log.Info("webhook delivered", "event_id", e.ID, "type", e.Type, "attempt", n, "duplicate", duplicate)
	} else {
		g.log.Warn("webhook failed", "event_id", e.ID, "type", e.Type, "attempt", n, "status", d.StatusCode, "err", d.Error)
	}
	return ok
}
