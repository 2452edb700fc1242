// Package sandboxgateway is a sandbox stand-in for an external payment gateway,
// for `make run`, tests and the crowd simulator. A Gateway is an
// http.Handler with its state in memory, so tests can serve it with
// httptest; the sandboxgateway command serves it on a port.
//
// One core — intents and their refunds, payers, events and their signed,
// retried, sometimes duplicated deliveries, the injected latency and
// outages, the hosted pay page and the /sandbox/* endpoints below — wears
// one of several personalities (Config.Personality): the merchant API
// under /v1/ and the webhooks' shape and signature of one provider. A
// personality keeps no state; it maps the core's objects onto its
// provider's (see personality.go). PersonalityFlashgate, the default, is
// the sandbox's own protocol, documented here; PersonalityStripe plays
// Stripe's Checkout Sessions, Refunds and Events (see stripe.go), and
// PersonalityRazorpay Razorpay's Payment Links, Payments, Refunds and
// webhooks (see razorpay.go; its API takes basic auth with RazorpayKeyID
// and the APIKey as the key secret). Intent ids are the provider's (a
// Stripe session's cs_test_…, a Razorpay link's plink_…), and the sandbox
// endpoints take them whatever the personality.
//
// Merchant API of the flashgate personality, every call with
// "Authorization: Bearer <APIKey>":
//
//	POST /v1/intents                {amount_minor, currency, metadata?, return_url?} + Idempotency-Key
//	POST /v1/intents/{id}/refunds   {amount_minor?} + Idempotency-Key; no amount refunds the rest
//	GET  /v1/intents/{id}
//	GET  /v1/intents[?created_since=<RFC 3339>]
//
// Sandbox endpoints, for scripts and tests, every call with
// "Authorization: Bearer <ControlToken>":
//
//	POST /sandbox/intents/{id}/pay  [{"payer": "upi:alice@okbank"}]
//	POST /sandbox/intents/{id}/fail
//	GET  /sandbox/intents[?created_since=...], GET /sandbox/events
//	GET and PUT /sandbox/webhooks   {"enabled": bool}
//	GET and PUT /sandbox/refunds    {"hold": bool}
//	POST /sandbox/refunds/{id}/process
//	POST /sandbox/refunds/{id}/fail
//
// A refund succeeds at once, unless refunds are held ({"hold": true}, off
// by default; Gateway.HoldRefunds): then it is created "pending", as a
// provider's refund often is for days, and counts against what is left
// to refund until process makes it "succeeded" or fail makes it
// "failed". A failed refund gives nothing back, so a new refund (another
// Idempotency-Key) may refund its amount again; its own key replays it,
// failed. Process and fail answer the refund (the core's JSON, as the
// flashgate protocol shows it), 404 unknown_refund for an id no refund has
// and 409 refund_not_pending for a refund already settled; {id} is the
// refund's id as the personality shows it (Razorpay's rfnd_…) or the
// core's re_….
//
// A paid intent names its payer, the paying instrument, as a real gateway
// reports it: the pay body's "payer" (1 to 100 bytes of printable
// characters without spaces, else 400), or, with no body or no payer,
// "upi:payer-<intent id>@sandbox", unique to the intent. Intent answers
// and webhook payloads carry "payer" once the intent has succeeded.
//
// Pay and fail also take "Authorization: Bearer <pay key>", the intent's
// own key, which pay_url carries in its fragment
// (<PublicURL>/pay/<id>#key=<pay key>, handed to the shopper unchanged):
// the hosted page sends it, and it is good for that intent only. Without
// a valid token every /sandbox/ path answers 401 unauthorized, unknown ones
// included. Open to anyone:
//
//	GET  /pay/{id}                  the hosted pay page
//	GET  /healthz
//
// Creation answers 201; a repeat with the same Idempotency-Key and the same
// request answers 200 with the same intent (or refund) as it is now, and the same key with another request 409 idempotency_conflict.
// Only successful requests use up a key, so a request answered 4xx or 503
// may be retried with its key. Refund keys are apart from creation keys.
// Errors are {"error": "<code>", "message": "<sentence>"}; every JSON
// answer carries X-Content-Type-Options: nosniff. Every HTML answer (the
// pay page, and its 404 for an unknown intent) carries it too, with
// Referrer-Policy: no-referrer, X-Frame-Options: DENY and a
// Content-Security-Policy that allows no framing (frame-ancestors 'none')
// and runs only the page's own inline style and script, by a nonce fresh
// for every answer.
//
// Each state change records one event and POSTs it to the webhook URL:
// in the flashgate personality as a WebhookPayload of type
// payment_intent.succeeded, payment_intent.failed, refund.created (a
// refund created pending), refund.succeeded or refund.failed, signed in
// the Payment-Signature header (see Sign); in another, as its provider
// does, sometimes as two events. Each is retried on any non-2xx answer or
// transport error with exponential backoff and, with probability
// DuplicateRate, delivered twice. Events about different intents, or
// about one intent, may arrive in any order.
package sandboxgateway
