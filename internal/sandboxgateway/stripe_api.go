package sandboxgateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The endpoints of the Stripe personality (see stripeFace).

// Stripe's limits on a Checkout Session's expires_at, from its creation.
const (
	stripeMinSessionLife     = 30 * time.Minute
	stripeMaxSessionLife     = 24 * time.Hour
	stripeDefaultSessionLife = 24 * time.Hour
	maxClientReferenceID     = 200
)

var stripeCurrencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// lineItem is one line_items entry.
type lineItem struct{ currency, name, amount, quantity string }

func (s *stripeFace) createSession(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r, "mode", "line_items[][price_data][currency]", "line_items[][price_data][unit_amount]",
		"line_items[][price_data][product_data][name]", "line_items[][quantity]", "metadata[*]",
		"payment_intent_data[metadata][*]", "client_reference_id", "success_url", "cancel_url", "expires_at",
		"adaptive_pricing[enabled]", "payment_method_types[]", "customer_email", "locale")
	if err != nil {
		return err
	}
	key, err := stripeIdempotencyKey(r)
	if err != nil {
		return err
	}
	switch mode := p.Get("mode"); mode {
	case "payment":
	case "":
		return stripeBad("parameter_missing", "mode", "Missing required param: mode.")
	default:
		return stripeBad("parameter_invalid_string", "mode", "The sandbox plays Checkout in payment mode only, not "+mode+".")
	}
	req := createRequest{Params: p.flat()}
	items := map[string]*lineItem{}
	for k, vs := range p.Values {
		rest, ok := strings.CutPrefix(k, "line_items[")
		if !ok {
			continue
		}
		idx, field, _ := strings.Cut(rest, "]")
		it := items[idx]
		if it == nil {
			it = &lineItem{}
			items[idx] = it
		}
		switch field {
		case "[price_data][currency]":
			it.currency = vs[0]
		case "[price_data][unit_amount]":
			it.amount = vs[0]
		case "[price_data][product_data][name]":
			it.name = vs[0]
		case "[quantity]":
			it.quantity = vs[0]
		}
	}
	if len(items) == 0 {
		return stripeBad("parameter_missing", "line_items", "line_items is required in payment mode.")
	}
	for idx, it := range items {
		param := "line_items[" + idx + "]"
		switch {
		case !stripeCurrencyRE.MatchString(it.currency):
			return stripeBad("parameter_invalid_string", param+"[price_data][currency]", "Invalid currency: "+it.currency+". Stripe currencies are three lower-case letters.")
		case req.Currency != "" && strings.ToUpper(it.currency) != req.Currency:
			return stripeBad("parameter_invalid_string", param+"[price_data][currency]", "All line items must have the same currency.")
		case it.name == "":
			return stripeBad("parameter_missing", param+"[price_data][product_data][name]", "Missing required param: "+param+"[price_data][product_data][name].")
		}
		amount, err := strconv.ParseInt(it.amount, 10, 64)
		if err != nil || amount < 0 {
			return stripeBad("parameter_invalid_integer", param+"[price_data][unit_amount]", "Invalid non-negative integer: "+it.amount)
		}
		qty, err := strconv.ParseInt(it.quantity, 10, 64)
		if err != nil || qty < 1 {
			return stripeBad("parameter_invalid_integer", param+"[quantity]", "Invalid positive integer: "+it.quantity)
		}
		req.Currency = strings.ToUpper(it.currency)
		req.AmountMinor += amount * qty
	}
	if req.AmountMinor <= 0 {
		return stripeBad("amount_too_small", "line_items", "The Checkout Session's total amount due must be greater than zero.")
	}
	if req.Metadata, err = p.metadataOf("metadata"); err != nil {
		return err
	}
	if _, err := p.metadataOf("payment_intent_data[metadata]"); err != nil {
		return err
	}
	if len(p.Get("client_reference_id")) > maxClientReferenceID {
		return stripeBad("parameter_invalid_string", "client_reference_id", "client_reference_id can have up to 200 characters.")
	}
	for _, u := range []string{"success_url", "cancel_url"} {
		if !p.Has(u) {
			continue
		}
		if parsed, err := url.Parse(p.Get(u)); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || len(p.Get(u)) > maxReturnURL {
			return stripeBad("url_invalid", u, "Not a valid URL")
		}
	}
	req.ReturnURL = p.Get("success_url")
	if e := p.Get("adaptive_pricing[enabled]"); p.Has("adaptive_pricing[enabled]") && e != "true" && e != "false" {
		return stripeBad("", "adaptive_pricing[enabled]", "Invalid boolean: "+e)
	}
	now := s.g.now()
	expires, ok, err := p.integer("expires_at")
	switch {
	case err != nil:
		return err
	case !ok:
		req.ExpiresAt = now.Add(stripeDefaultSessionLife).Truncate(time.Second)
	case time.Unix(expires, 0).Before(now.Add(stripeMinSessionLife)):
		return stripeBad("parameter_invalid_integer", "expires_at", "The `expires_at` timestamp must be at least 30 minutes from Checkout Session creation.")
	case time.Unix(expires, 0).After(now.Add(stripeMaxSessionLife)):
		return stripeBad("parameter_invalid_integer", "expires_at", "The `expires_at` timestamp must be less than 24 hours from Checkout Session creation.")
	default:
		req.ExpiresAt = time.Unix(expires, 0).UTC()
	}
	if msg := req.validate(); msg != "" { // a backstop: the checks above are Stripe's
		return stripeBad("", "", msg)
	}
	in, created, err := s.g.createIntent(key, req)
	switch {
	case errors.Is(err, errIdempotencyUsed):
		return stripeIdempotencyError(key)
	case err != nil:
		return err
	}
	return s.answer(w, !created, stripeSessionKind, p.expand, func(x expansion) any { return s.session(in, x) })
}

func (s *stripeFace) getSession(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r)
	if err != nil {
		return err
	}
	in, err := s.sessionIntent(r.PathValue("id"), "id")
	if err != nil {
		return err
	}
	return s.answer(w, false, stripeSessionKind, p.expand, func(x expansion) any { return s.session(in, x) })
}

func (s *stripeFace) expireSession(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	in, err := s.g.expire(id)
	switch {
	case errors.Is(err, ErrUnknownIntent):
		return stripeMissing("checkout.session", id, "session")
	case errors.Is(err, ErrIntentFailed), errors.Is(err, ErrIntentSucceeded):
		return stripeBad("", "", "Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a status of \""+
			map[bool]string{true: "expired", false: "complete"}[errors.Is(err, ErrIntentFailed)]+"\".")
	case err != nil:
		return err
	}
	return s.answer(w, false, stripeSessionKind, p.expand, func(x expansion) any { return s.session(in, x) })
}

func (s *stripeFace) getPaymentIntent(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	in, err := s.paidIntent(id, stripePIPrefix, "payment_intent", "id")
	if err != nil {
		return err
	}
	return s.answer(w, false, stripePIKind, p.expand, func(x expansion) any { return s.paymentIntent(in, x) })
}

func (s *stripeFace) getCharge(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r)
	if err != nil {
		return err
	}
	in, err := s.paidIntent(r.PathValue("id"), stripeChargePrefix, "charge", "id")
	if err != nil {
		return err
	}
	return s.answer(w, false, stripeChargeKind, p.expand, func(x expansion) any { return s.charge(in, x) })
}

func (s *stripeFace) createRefund(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r, "payment_intent", "charge", "amount", "metadata[*]", "reason")
	if err != nil {
		return err
	}
	key, err := stripeIdempotencyKey(r)
	if err != nil {
		return err
	}
	var in Intent
	switch {
	case p.Has("payment_intent") && p.Has("charge"):
		return stripeBad("parameters_exclusive", "charge", "You may only specify one of these parameters: charge, payment_intent.")
	case p.Has("payment_intent"):
		in, err = s.paidIntent(p.Get("payment_intent"), stripePIPrefix, "payment_intent", "payment_intent")
	case p.Has("charge"):
		in, err = s.paidIntent(p.Get("charge"), stripeChargePrefix, "charge", "charge")
	default:
		return stripeBad("parameter_missing", "", "One of the following params should be provided for this request: charge or payment_intent.")
	}
	if err != nil {
		return err
	}
	var amount *int64
	switch n, ok, err := p.integer("amount"); {
	case err != nil:
		return err
	case ok && n <= 0:
		return stripeBad("parameter_invalid_integer", "amount", "Invalid positive integer")
	case ok:
		amount = &n
	}
	switch reason := p.Get("reason"); reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return stripeBad("parameter_invalid_string", "reason", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
	}
	if _, err := p.metadataOf("metadata"); err != nil {
		return err
	}
	re, created, err := s.g.refund(in.ID, key, amount, p.flat())
	switch {
	case errors.Is(err, errIdempotencyUsed):
		return stripeIdempotencyError(key)
	case errors.Is(err, errRefundExceeds):
		now, _ := s.g.Intent(in.ID)
		ch := stripeChargePrefix + stripeHex(in.ID)
		if refunded(now.Refunds) >= now.AmountMinor {
			return stripeBad("charge_already_refunded", "", "Charge "+ch+" has already been refunded.")
		}
		return stripeBad("amount_too_large", "amount", fmt.Sprintf("Refund amount (%s) is greater than unrefunded amount on charge (%s)",
			formatAmount(*amount, now.Currency), formatAmount(now.AmountMinor-refunded(now.Refunds), now.Currency)))
	case err != nil:
		return err
	}
	return s.answer(w, !created, stripeRefundKind, p.expand, func(x expansion) any { return s.refund(in, re, x) })
}

func (s *stripeFace) getRefund(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	for _, in := range s.g.Intents() {
		for _, re := range in.Refunds {
			if re.ID == id {
				return s.answer(w, false, stripeRefundKind, p.expand, func(x expansion) any { return s.refund(in, re, x) })
			}
		}
	}
	return stripeMissing("refund", id, "id")
}

// listParams are the parameters every list call takes.
var listParams = []string{"limit", "starting_after", "ending_before", "created", "created[gt]", "created[gte]", "created[lt]", "created[lte]"}

func (s *stripeFace) listSessions(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r, append([]string{"payment_intent", "status"}, listParams...)...)
	if err != nil {
		return err
	}
	inCreated, err := createdFilter(p)
	if err != nil {
		return err
	}
	switch st := p.Get("status"); st {
	case "", "open", "complete", "expired":
	default:
		return stripeBad("parameter_invalid_string", "status", "Invalid status: must be one of open, complete, or expired")
	}
	var items []Intent
	all := s.g.Intents()
	for i := len(all) - 1; i >= 0; i-- { // newest first
		in := all[i]
		switch {
		case !inCreated(in.CreatedAt):
		case p.Has("payment_intent") && (in.Status != StatusSucceeded || p.Get("payment_intent") != stripePIPrefix+stripeHex(in.ID)):
		case p.Has("status") && p.Get("status") != stripeSessionStatus(in):
		default:
			items = append(items, in)
		}
	}
	page, more, err := paginate(p, items, func(in Intent) string { return in.ID }, "checkout.session")
	if err != nil {
		return err
	}
	return s.answerList(w, "/v1/checkout/sessions", stripeSessionKind, p.expand, len(page), more,
		func(i int, x expansion) any { return s.session(page[i], x) })
}

func (s *stripeFace) listRefunds(w http.ResponseWriter, r *http.Request) error {
	p, err := readStripeParams(w, r, append([]string{"charge", "payment_intent"}, listParams...)...)
	if err != nil {
		return err
	}
	inCreated, err := createdFilter(p)
	if err != nil {
		return err
	}
	type owned struct {
		in Intent
		re Refund
	}
	var items []owned
	all := s.g.Intents()
	for _, in := range all {
		hex := stripeHex(in.ID)
		if (p.Has("charge") && p.Get("charge") != stripeChargePrefix+hex) ||
			(p.Has("payment_intent") && p.Get("payment_intent") != stripePIPrefix+hex) {
			continue
		}
		for _, re := range in.Refunds {
			if inCreated(re.CreatedAt) {
				items = append(items, owned{in, re})
			}
		}
	}
	slices.SortStableFunc(items, func(a, b owned) int { return b.re.CreatedAt.Compare(a.re.CreatedAt) }) // newest first
	page, more, err := paginate(p, items, func(o owned) string { return o.re.ID }, "refund")
	if err != nil {
		return err
	}
	return s.answerList(w, "/v1/refunds", stripeRefundKind, p.expand, len(page), more,
		func(i int, x expansion) any { return s.refund(page[i].in, page[i].re, x) })
}

// createdFilter is the created[...] filter of a list call, on Unix
// seconds as Stripe compares them.
func createdFilter(p stripeParams) (func(time.Time) bool, error) {
	type bound struct {
		key string
		ok  func(t, b int64) bool
	}
	var checks []func(int64) bool
	for _, b := range []bound{
		{"created", func(t, b int64) bool { return t == b }},
		{"created[gt]", func(t, b int64) bool { return t > b }},
		{"created[gte]", func(t, b int64) bool { return t >= b }},
		{"created[lt]", func(t, b int64) bool { return t < b }},
		{"created[lte]", func(t, b int64) bool { return t <= b }},
	} {
		n, ok, err := p.integer(b.key)
		if err != nil {
			return nil, err
		}
		if ok {
			checks = append(checks, func(t int64) bool { return b.ok(t, n) })
		}
	}
	return func(t time.Time) bool {
		for _, c := range checks {
			if !c(t.Unix()) {
				return false
			}
		}
		return true
	}, nil
}

// Stripe's page sizes.
const (
	stripeDefaultLimit = 10
	stripeMaxLimit     = 100
)

// paginate cuts items (newest first) to p's page: limit items after
// starting_after or before ending_before (ids of kind), and whether more
// lie beyond.
func paginate[T any](p stripeParams, items []T, id func(T) string, kind string) ([]T, bool, error) {
	limit := int64(stripeDefaultLimit)
	if n, ok, err := p.integer("limit"); err != nil {
		return nil, false, err
	} else if ok {
		if n < 1 || n > stripeMaxLimit {
			return nil, false, stripeBad("parameter_invalid_integer", "limit", "This value must be between 1 and 100.")
		}
		limit = n
	}
	find := func(param string) (int, error) {
		want := p.Get(param)
		i := slices.IndexFunc(items, func(t T) bool { return id(t) == want })
		if i < 0 {
			return 0, stripeBad("resource_missing", param, fmt.Sprintf("No such %s: '%s'", kind, want))
		}
		return i, nil
	}
	switch {
	case p.Has("starting_after") && p.Has("ending_before"):
		return nil, false, stripeBad("parameters_exclusive", "ending_before", "You may only specify one of these parameters: ending_before, starting_after.")
	case p.Has("starting_after"):
		i, err := find("starting_after")
		if err != nil {
			return nil, false, err
		}
		items = items[i+1:]
	case p.Has("ending_before"):
		i, err := find("ending_before")
		if err != nil {
			return nil, false, err
		}
		items = items[:i]
		if len(items) > int(limit) {
			return items[len(items)-int(limit):], true, nil
		}
		return items, false, nil
	}
	if len(items) > int(limit) {
		return items[:limit], true, nil
	}
	return items, false, nil
}

// sessionIntent is the intent of Checkout Session id, named param in a
// refusal.
func (s *stripeFace) sessionIntent(id, param string) (Intent, error) {
	in, err := s.g.Intent(id)
	if errors.Is(err, ErrUnknownIntent) || !strings.HasPrefix(id, stripeSessionPrefix) {
		return Intent{}, stripeMissing("checkout.session", id, param)
	}
	return in, err
}

// paidIntent is the paid intent whose PaymentIntent or Charge (prefix)
// is id: only a paid session has them.
func (s *stripeFace) paidIntent(id, prefix, kind, param string) (Intent, error) {
	hex, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return Intent{}, stripeMissing(kind, id, param)
	}
	in, err := s.g.Intent(stripeSessionPrefix + hex)
	if err != nil || in.Status != StatusSucceeded {
		return Intent{}, stripeMissing(kind, id, param)
	}
	return in, nil
}

// answer writes the object render makes under p's expansions, checked
// against kind's expandable fields; replayed marks an idempotent replay.
func (s *stripeFace) answer(w http.ResponseWriter, replayed bool, kind string, expand []string, render func(expansion) any) error {
	x, err := checkExpand(kind, expand)
	if err != nil {
		return err
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, render(x))
	return nil
}

// answerList writes a list object of n items at url, item rendering each
// under the expansions of "data.…".
func (s *stripeFace) answerList(w http.ResponseWriter, url, kind string, expand []string, n int, more bool, item func(int, expansion) any) error {
	var inner []string
	for _, e := range expand {
		rest, ok := strings.CutPrefix(e, "data.")
		if !ok {
			return stripeBad("", "expand", "This property cannot be expanded ("+e+"). You may want to try expanding 'data."+e+"' instead.")
		}
		inner = append(inner, rest)
	}
	x, err := checkExpand(kind, inner)
	if err != nil {
		return err
	}
	data := make([]any, n)
	for i := range n {
		data[i] = item(i, x)
	}
	writeJSON(w, http.StatusOK, stripeList(url, data, more))
	return nil
}
