package sandboxgateway

import (
	"crypto/sha256"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The kinds of Stripe object the personality renders, for checkExpand.
const (
	stripeSessionKind = "checkout.session"
	stripePIKind      = "payment_intent"
	stripeChargeKind  = "charge"
	stripeRefundKind  = "refund"
)

// stripeExpandable gives, for each kind of object, the fields expand[] may
// name and the kind each expands to ("" for a list of refunds, which
// expands no further).
var stripeExpandable = map[string]map[string]string{
	stripeSessionKind: {"payment_intent": stripePIKind},
	stripePIKind:      {"latest_charge": stripeChargeKind},
	stripeChargeKind:  {"refunds": "", "payment_intent": stripePIKind},
	stripeRefundKind:  {"charge": stripeChargeKind, "payment_intent": stripePIKind},
}

// stripeMaxExpandDepth is the deepest expansion Stripe takes.
const stripeMaxExpandDepth = 4

// expansion is the expand[] paths that apply to one object, relative to
// it ("payment_intent.latest_charge" for a session); nil expands nothing.
type expansion []string

// has reports whether field is expanded.
func (x expansion) has(field string) bool {
	for _, p := range x {
		if p == field || strings.HasPrefix(p, field+".") {
			return true
		}
	}
	return false
}

// under is the expansion of field's object.
func (x expansion) under(field string) expansion {
	var out expansion
	for _, p := range x {
		if rest, ok := strings.CutPrefix(p, field+"."); ok {
			out = append(out, rest)
		}
	}
	return out
}

// checkExpand refuses a path that names a field kind's object (or one it
// expands to) cannot expand, or is deeper than Stripe goes.
func checkExpand(kind string, paths []string) (expansion, error) {
	for _, path := range paths {
		parts := strings.Split(path, ".")
		if len(parts) > stripeMaxExpandDepth {
			return nil, stripeBad("", "expand", "You cannot expand more than 4 levels of a property ("+path+").")
		}
		k := kind
		for _, f := range parts {
			next, ok := stripeExpandable[k][f]
			if !ok {
				return nil, stripeBad("", "expand", "This property cannot be expanded ("+f+").")
			}
			k = next
		}
	}
	return expansion(paths), nil
}

// stripeHex is the hex digits an intent's Stripe ids share.
func stripeHex(intentID string) string { return strings.TrimPrefix(intentID, stripeSessionPrefix) }

// stripeSessionStatus is an intent's Checkout Session status.
func stripeSessionStatus(in Intent) string {
	switch in.Status {
	case StatusSucceeded:
		return "complete"
	case StatusFailed:
		return "expired"
	}
	return "open"
}

// stripeFingerprint is the card fingerprint of a sandbox payer: 16
// letters and digits, the same for the same payer whichever session it
// pays, as Stripe gives one card one fingerprint.
func stripeFingerprint(payer string) string {
	sum := sha256.Sum256([]byte("flashgate-sandbox-card:" + payer))
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 16)
	for i := range b {
		b[i] = digits[int(sum[i])%len(digits)]
	}
	return string(b)
}

// StripeFingerprint is the card fingerprint the Stripe personality reports
// for payer (see Intent.Payer): what the origin's Stripe adapter names the
// payer, with "card:" before it.
func StripeFingerprint(payer string) string { return stripeFingerprint(payer) }

// paramsOf reads Intent.Params or Refund.Params, which the personality
// wrote with flat.
func paramsOf(encoded string) url.Values {
	v, _ := url.ParseQuery(encoded) // flat wrote it
	return v
}

// paramsUnder is the hash under prefix in params (a request's metadata,
// say); never nil.
func paramsUnder(params url.Values, prefix string) map[string]string {
	out := map[string]string{}
	for k, vs := range params {
		if name, ok := strings.CutPrefix(k, prefix+"["); ok && strings.HasSuffix(name, "]") && vs[0] != "" {
			out[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	return out
}

// param is params' key, or nil (JSON null) when absent.
func param(params url.Values, key string) any {
	if params.Has(key) {
		return params.Get(key)
	}
	return nil
}

// session renders an intent as a Checkout Session, x expanding it.
func (s *stripeFace) session(in Intent, x expansion) map[string]any {
	status := stripeSessionStatus(in)
	var url, pi, details any
	paymentStatus := "unpaid"
	if status == "open" {
		url = in.PayURL
	}
	if in.Status == StatusSucceeded {
		paymentStatus = "paid"
		pi = stripePIPrefix + stripeHex(in.ID)
		if x.has("payment_intent") {
			pi = s.paymentIntent(in, x.under("payment_intent"))
		}
		details = map[string]any{"address": nil, "email": nil, "name": nil, "phone": nil, "tax_exempt": "none", "tax_ids": []any{}}
	}
	var expiresAt int64
	if !in.ExpiresAt.IsZero() {
		expiresAt = in.ExpiresAt.Unix()
	}
	params := paramsOf(in.Params)
	adaptive := params.Get("adaptive_pricing[enabled]") != "false"
	return map[string]any{
		"id":                    in.ID,
		"object":                "checkout.session",
		"adaptive_pricing":      map[string]any{"enabled": adaptive},
		"after_expiration":      nil,
		"allow_promotion_codes": nil,
		"amount_subtotal":       in.AmountMinor,
		"amount_total":          in.AmountMinor,
		"automatic_tax":         map[string]any{"enabled": false, "liability": nil, "status": nil},
		"cancel_url":            param(params, "cancel_url"),
		"client_reference_id":   param(params, "client_reference_id"),
		"client_secret":         nil,
		"created":               in.CreatedAt.Unix(),
		"currency":              strings.ToLower(in.Currency),
		"customer":              nil,
		"customer_creation":     "if_required",
		"customer_details":      details,
		"customer_email":        param(params, "customer_email"),
		"expires_at":            expiresAt,
		"invoice":               nil,
		"livemode":              false,
		"locale":                param(params, "locale"),
		"metadata":              in.Metadata,
		"mode":                  "payment",
		"payment_intent":        pi,
		"payment_link":          nil,
		"payment_method_types":  []string{"card"},
		"payment_status":        paymentStatus,
		"setup_intent":          nil,
		"status":                status,
		"submit_type":           nil,
		"subscription":          nil,
		"success_url":           param(params, "success_url"),
		"total_details":         map[string]any{"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0},
		"ui_mode":               "hosted",
		"url":                   url,
	}
}

// paymentIntent renders a paid intent's PaymentIntent, x expanding it.
func (s *stripeFace) paymentIntent(in Intent, x expansion) map[string]any {
	hex := stripeHex(in.ID)
	var charge any = stripeChargePrefix + hex
	if x.has("latest_charge") {
		charge = s.charge(in, x.under("latest_charge"))
	}
	return map[string]any{
		"id":                   stripePIPrefix + hex,
		"object":               "payment_intent",
		"amount":               in.AmountMinor,
		"amount_capturable":    0,
		"amount_received":      in.AmountMinor,
		"canceled_at":          nil,
		"cancellation_reason":  nil,
		"capture_method":       "automatic_async",
		"client_secret":        stripePIPrefix + hex + "_secret_" + hex,
		"confirmation_method":  "automatic",
		"created":              in.SettledAt.Unix(),
		"currency":             strings.ToLower(in.Currency),
		"customer":             nil,
		"description":          nil,
		"last_payment_error":   nil,
		"latest_charge":        charge,
		"livemode":             false,
		"metadata":             paramsUnder(paramsOf(in.Params), "payment_intent_data[metadata]"),
		"next_action":          nil,
		"payment_method":       "pm_" + hex,
		"payment_method_types": []string{"card"},
		"status":               "succeeded",
	}
}

// charge renders a paid intent's Charge, x expanding it: its refunds
// only when expanded (as Stripe does since 2022-11-15), newest first.
func (s *stripeFace) charge(in Intent, x expansion) map[string]any {
	hex := stripeHex(in.ID)
	back := refunded(in.Refunds) // Stripe counts pending refunds, not failed ones
	var pi any = stripePIPrefix + hex
	if x.has("payment_intent") {
		pi = s.paymentIntent(in, x.under("payment_intent"))
	}
	c := map[string]any{
		"id":                  stripeChargePrefix + hex,
		"object":              "charge",
		"amount":              in.AmountMinor,
		"amount_captured":     in.AmountMinor,
		"amount_refunded":     back,
		"balance_transaction": "txn_" + hex,
		"billing_details":     map[string]any{"address": nil, "email": nil, "name": nil, "phone": nil},
		"captured":            true,
		"created":             in.SettledAt.Unix(),
		"currency":            strings.ToLower(in.Currency),
		"description":         nil,
		"disputed":            false,
		"failure_code":        nil,
		"failure_message":     nil,
		"livemode":            false,
		"metadata":            paramsUnder(paramsOf(in.Params), "payment_intent_data[metadata]"),
		"outcome": map[string]any{"network_status": "approved_by_network", "reason": nil, "risk_level": "normal",
			"seller_message": "Payment complete.", "type": "authorized"},
		"paid":           true,
		"payment_intent": pi,
		"payment_method": "pm_" + hex,
		"payment_method_details": map[string]any{"type": "card", "card": map[string]any{
			"brand": "visa", "country": "US", "exp_month": 12, "exp_year": in.SettledAt.Year() + 3, "funding": "credit",
			"fingerprint": stripeFingerprint(in.Payer), "last4": "4242", "network": "visa",
			"checks": map[string]any{"address_line1_check": nil, "address_postal_code_check": nil, "cvc_check": "pass"},
		}},
		"receipt_url": nil,
		"refunded":    back >= in.AmountMinor,
		"status":      "succeeded",
	}
	if x.has("refunds") {
		res := slices.Clone(in.Refunds)
		slices.Reverse(res)
		data := make([]any, len(res))
		for i, re := range res {
			data[i] = s.refund(in, re, nil)
		}
		c["refunds"] = stripeList("/v1/charges/"+stripeChargePrefix+hex+"/refunds", data, false)
	}
	return c
}

// stripeRefundFailure is the failure_reason of a failed refund: one of
// the reasons StripeAPIVersion documents.
const stripeRefundFailure = "expired_or_canceled_card"

// refund renders a refund of a paid intent, x expanding it: its status
// the core's, a pending one with its pending_reason, a failed one with
// its failure_reason and the balance transaction that reverses its own.
func (s *stripeFace) refund(in Intent, re Refund, x expansion) map[string]any {
	hex := stripeHex(in.ID)
	reHex := strings.TrimPrefix(re.ID, coreRefundPrefix)
	var charge, pi any = stripeChargePrefix + hex, stripePIPrefix + hex
	if x.has("charge") {
		charge = s.charge(in, x.under("charge"))
	}
	if x.has("payment_intent") {
		pi = s.paymentIntent(in, x.under("payment_intent"))
	}
	reference := "available"
	switch re.Status {
	case RefundPending:
		reference = "pending"
	case RefundFailed:
		reference = "unavailable"
	}
	r := map[string]any{
		"id":                  re.ID,
		"object":              "refund",
		"amount":              re.AmountMinor,
		"balance_transaction": "txn_" + reHex,
		"charge":              charge,
		"created":             re.CreatedAt.Unix(),
		"currency":            strings.ToLower(in.Currency),
		"destination_details": map[string]any{"type": "card", "card": map[string]any{
			"reference": strconv.FormatInt(re.CreatedAt.Unix(), 10) + hex[:8], "reference_status": reference,
			"reference_type": "acquirer_reference_number", "type": "refund"}},
		"metadata":                 paramsUnder(paramsOf(re.Params), "metadata"),
		"payment_intent":           pi,
		"reason":                   param(paramsOf(re.Params), "reason"),
		"receipt_number":           nil,
		"source_transfer_reversal": nil,
		"status":                   re.Status,
		"transfer_reversal":        nil,
	}
	switch re.Status {
	case RefundPending:
		r["pending_reason"] = "processing"
	case RefundFailed:
		r["failure_reason"] = stripeRefundFailure
		r["failure_balance_transaction"] = "txn_" + reHex[:len(reHex)-1] + "x" // not balance_transaction: x is no hex digit
	}
	return r
}
