package sandboxgateway

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"
)

// The personalities a Gateway can play (Config.Personality): which
// provider's merchant API it answers and whose webhooks it sends. Every one
// is a face over the same core — intents, refunds, events, payers, the pay
// page, the /sandbox/* control endpoints, deliveries with their retries and
// duplicates, and the injected failures — so that the origin's adapter of
// each provider can be run offline against the sandbox.
const (
	// PersonalityFlashgate is the sandbox's own protocol: /v1/intents and
	// the Payment-Signature header, as this package documents them.
	PersonalityFlashgate = "flashgate"
	// PersonalityStripe plays Stripe: Checkout Sessions, Refunds and
	// Events, signed in Stripe-Signature; see stripe.go.
	PersonalityStripe = "stripe"
	// PersonalityRazorpay plays Razorpay: Payment Links, Payments and
	// Refunds, signed in X-Razorpay-Signature; see razorpay.go.
	PersonalityRazorpay = "razorpay"
)

// personalities builds each personality for its gateway.
var personalities = map[string]func(*Gateway) personality{
	PersonalityFlashgate: func(g *Gateway) personality { return flashgate{g} },
	PersonalityStripe:    func(g *Gateway) personality { return &stripeFace{g} },
	PersonalityRazorpay:  func(g *Gateway) personality { return &razorpayFace{g} },
}

// Personalities lists the names Config.Personality takes, sorted.
func Personalities() []string { return slices.Sorted(maps.Keys(personalities)) }

// personality is one provider's face over the gateway's core: its
// merchant API and its webhooks. It keeps no state of its own; whatever
// its objects carry beyond the core's is derived from an intent (its id,
// its Params) when rendered.
type personality interface {
	// intentPrefix starts every intent id, before 24 random hex digits:
	// the id of the provider's object an intent is (a Stripe Checkout
	// Session's "cs_test_", say).
	intentPrefix() string
	// routes adds the merchant API to mux, each endpoint behind g.api.
	routes(mux *http.ServeMux)
	// encode is the webhooks of core event e, usually one, in the order
	// they are recorded: each with its id (the first e.ID, any other a
	// fresh one), the provider's event type and the body, sent as it is
	// on every attempt.
	encode(e coreEvent) ([]providerEvent, error)
	// coreRefundID is the core's id of the refund the personality shows
	// as id (Razorpay's rfnd_… is re_…); any other id as it is.
	coreRefundID(id string) string
	// sign sets the headers of one delivery of event eventID's body, made
	// at t (content type, user agent, signature, an event id header if
	// the provider sends one), signed with secrets.
	sign(h http.Header, eventID string, secrets []string, t time.Time, body []byte)
}

// coreEvent is a state change of the core, for a personality to encode.
type coreEvent struct {
	ID     string    // "evt_" + 24 hex digits: its first webhook's id (see encode)
	Kind   string    // EventPaymentSucceeded, EventRefundCreated, ... (see Event.Kind)
	At     time.Time // when it happened
	Intent Intent    // the intent as of the event
	Refund *Refund   // the refund as of the event, for the refund kinds
	// From is the refund's status before a settlement (RefundPending);
	// "" for a refund just created.
	From string
}

// providerEvent is one provider event a personality makes of a core event.
type providerEvent struct {
	id   string // "evt_" + 24 hex digits
	typ  string // the provider's event type
	body []byte
}

// flashgate is PersonalityFlashgate.
type flashgate struct{ g *Gateway }

func (flashgate) intentPrefix() string { return "pi_" }

func (f flashgate) routes(mux *http.ServeMux) {
	g := f.g
	mux.Handle("POST /v1/intents", g.api(g.handleCreate))
	mux.Handle("GET /v1/intents", g.api(g.handleList))
	mux.Handle("GET /v1/intents/{id}", g.api(g.handleGet))
	mux.Handle("POST /v1/intents/{id}/refunds", g.api(g.handleRefund))
}

// encode sends each core event as the event of its kind's type, a
// WebhookPayload.
func (flashgate) encode(e coreEvent) ([]providerEvent, error) {
	body, err := json.Marshal(WebhookPayload{ID: e.ID, Type: e.Kind, CreatedAt: e.At,
		Data: WebhookData{Intent: e.Intent, Refund: e.Refund}})
	return []providerEvent{{e.ID, e.Kind, body}}, err
}

func (flashgate) coreRefundID(id string) string { return id }

func (flashgate) sign(h http.Header, _ string, secrets []string, t time.Time, body []byte) {
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", userAgent)
	h.Set(SignatureHeader, Sign(secrets, t, body))
}
