package sandboxgateway

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The endpoints of the Razorpay personality (see razorpayFace).

// Razorpay's limits on a Payment Link.
const (
	razorpayMinLinkLife   = 15 * time.Minute
	razorpayMaxReference  = 40
	razorpayMaxDescriptor = 2048
	razorpayMinAmount     = 100 // minor units: "The amount must be at least INR 1.00"
)

// razorpayMaxLinkLife is how far ahead expire_by may be: six months.
func razorpayMaxLinkLife(now time.Time) time.Time { return now.AddDate(0, 6, 0) }

var (
	razorpayCurrencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	// razorpayIdemRE is what X-Refund-Idempotency takes.
	razorpayIdemRE = regexp.MustCompile(`^[A-Za-z0-9_-]{10,}$`)
)

func (f *razorpayFace) createLink(w http.ResponseWriter, r *http.Request) error {
	m, err := readRazorpayBody(w, r, "amount", "currency", "accept_partial", "first_min_partial_amount", "upi_link",
		"description", "reference_id", "customer", "expire_by", "notify", "notes", "callback_url", "callback_method",
		"reminder_enable")
	if err != nil {
		return err
	}
	params := url.Values{}
	amount, ok, err := m.integer("amount")
	switch {
	case err != nil:
		return err
	case !ok:
		return razorpayBad("amount", "The amount field is required.")
	case amount < razorpayMinAmount:
		return razorpayBad("amount", "The amount must be at least INR 1.00")
	}
	currency, ok, err := m.str("currency")
	switch {
	case err != nil:
		return err
	case !ok:
		currency = "INR"
	case !razorpayCurrencyRE.MatchString(currency):
		return razorpayBad("currency", "The currency must be a valid three-letter ISO currency code, in capitals.")
	}
	ref, _, err := m.str("reference_id")
	switch {
	case err != nil:
		return err
	case len(ref) > razorpayMaxReference:
		return razorpayBad("reference_id", "The reference id may not be greater than 40 characters.")
	}
	desc, _, err := m.str("description")
	switch {
	case err != nil:
		return err
	case len(desc) > razorpayMaxDescriptor:
		return razorpayBad("description", "The description may not be greater than 2048 characters.")
	}
	partial, err := m.boolean("accept_partial")
	if err != nil {
		return err
	}
	if partial {
		return razorpayBad("accept_partial", "The sandbox does not play partial payments: accept_partial must be false.")
	}
	if _, _, err := m.integer("first_min_partial_amount"); err != nil {
		return err
	}
	upi, err := m.boolean("upi_link")
	if err != nil {
		return err
	}
	if upi && currency != "INR" {
		return razorpayBad("currency", "upi is currently supported only in indian currency")
	}
	reminders, err := m.boolean("reminder_enable")
	if err != nil {
		return err
	}
	now := f.g.now()
	var expires time.Time
	switch by, ok, err := m.integer("expire_by"); {
	case err != nil:
		return err
	case !ok || by == 0:
	case time.Unix(by, 0).Before(now.Add(razorpayMinLinkLife)):
		return razorpayBad("expire_by", "timestamp must be atleast 15 minutes in future")
	case time.Unix(by, 0).After(razorpayMaxLinkLife(now)):
		return razorpayBad("expire_by", "the expire by date cannot exceed six months from the date of creation")
	default:
		expires = time.Unix(by, 0).UTC()
	}
	notes, err := m.notes("notes")
	if err != nil {
		return err
	}
	for _, k := range []string{"customer", "notify"} {
		sub, err := m.notes(k)
		if err != nil {
			return err
		}
		for name, v := range sub {
			params.Set(k+"["+name+"]", v)
		}
	}
	callback, hasCallback, err := m.str("callback_url")
	if err != nil {
		return err
	}
	if hasCallback {
		if u, err := url.Parse(callback); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(callback) > maxReturnURL {
			return razorpayBad("callback_url", "The callback url format is invalid.")
		}
	}
	method, hasMethod, err := m.str("callback_method")
	switch {
	case err != nil:
		return err
	case hasMethod && method != "get":
		return razorpayBad("callback_method", "The selected callback method is invalid.")
	case hasMethod && !hasCallback:
		return razorpayBad("callback_method", "The callback method field is not required when callback url is not present.")
	case hasCallback && !hasMethod:
		return razorpayBad("callback_method", "The callback method field is required when callback url is present.")
	}
	for k, v := range map[string]string{"reference_id": ref, "description": desc, "callback_url": callback, "callback_method": method} {
		if v != "" {
			params.Set(k, v)
		}
	}
	params.Set("upi_link", strconv.FormatBool(upi))
	params.Set("reminder_enable", strconv.FormatBool(reminders))
	if !expires.IsZero() {
		params.Set("expire_by", strconv.FormatInt(expires.Unix(), 10))
	}
	req := createRequest{AmountMinor: amount, Currency: currency, Metadata: notes, ReturnURL: callback,
		ExpiresAt: expires, Params: params.Encode()}
	if msg := req.validate(); msg != "" { // a backstop: the checks above are Razorpay's
		return razorpayBad("", msg)
	}
	// Razorpay takes no idempotency key for links: reference_id is unique
	// among them. It is the core's key, so the check is atomic; a link
	// without one gets a key of its own.
	key := "razorpay-link-" + randomHex(16)
	if ref != "" {
		key = "razorpay-reference:" + ref
	}
	in, created, err := f.g.createIntent(key, req)
	switch {
	case errors.Is(err, errIdempotencyUsed), err == nil && !created:
		return razorpayBad("reference_id", "payment link creation with reference ID already attempted")
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, razorpayLink(in))
	return nil
}

func (f *razorpayFace) getLink(w http.ResponseWriter, r *http.Request) error {
	in, err := f.linkIntent(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, razorpayLink(in))
	return nil
}

func (f *razorpayFace) cancelLink(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := f.linkIntent(id); err != nil {
		return err
	}
	in, err := f.g.expire(id)
	switch {
	case errors.Is(err, ErrIntentFailed), errors.Is(err, ErrIntentSucceeded):
		now, _ := f.g.Intent(id)
		return razorpayBad("", fmt.Sprintf("Payment Link cannot be cancelled in %s state", razorpayLinkStatus(now)))
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, razorpayLink(in))
	return nil
}

func (f *razorpayFace) listLinks(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if k != "reference_id" && k != "payment_id" {
			return razorpayBad(k, k+" is/are not required and should not be sent")
		}
	}
	out := []any{}
	all := f.g.Intents()
	for i := len(all) - 1; i >= 0; i-- { // newest first
		in := all[i]
		switch {
		case q.Has("reference_id") && paramsOf(in.Params).Get("reference_id") != q.Get("reference_id"):
		case q.Has("payment_id") && (in.Status != StatusSucceeded || q.Get("payment_id") != razorpayPaymentPrefix+razorpayHex(in.ID)):
		default:
			out = append(out, razorpayLink(in))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"payment_links": out})
	return nil
}

// razorpayWindow reads from, to, count and skip as Fetch All Payments
// documents them: from and to are Unix seconds, inclusive; count 1 to 100,
// default 10.
type razorpayWindow struct {
	from, to    int64
	count, skip int
}

func readRazorpayWindow(q url.Values) (razorpayWindow, error) {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if k != "from" && k != "to" && k != "count" && k != "skip" {
			return razorpayWindow{}, razorpayBad(k, k+" is/are not required and should not be sent")
		}
	}
	w := razorpayWindow{from: 0, to: 1<<62 - 1, count: 10}
	num := func(k string, min, max int64) (int64, bool, error) {
		if !q.Has(k) {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(q.Get(k), 10, 64)
		if err != nil {
			return 0, false, razorpayBad(k, "The "+k+" must be an integer.")
		}
		if n < min || n > max {
			return 0, false, razorpayBad(k, fmt.Sprintf("%s must be between %d and %d", k, min, max))
		}
		return n, true, nil
	}
	const minTime, maxTime = 946684800, 4765046400
	if n, ok, err := num("from", minTime, maxTime); err != nil {
		return w, err
	} else if ok {
		w.from = n
	}
	if n, ok, err := num("to", minTime, maxTime); err != nil {
		return w, err
	} else if ok {
		w.to = n
	}
	if n, ok, err := num("count", 1, 100); err != nil {
		return w, err
	} else if ok {
		w.count = int(n)
	}
	if n, ok, err := num("skip", 0, 1<<31); err != nil {
		return w, err
	} else if ok {
		w.skip = int(n)
	}
	return w, nil
}

// page cuts items (each created at its Unix second) to the window.
func (w razorpayWindow) page(items []any, at []int64) []any {
	out := []any{}
	for i, it := range items {
		if at[i] >= w.from && at[i] <= w.to {
			out = append(out, it)
		}
	}
	if w.skip >= len(out) {
		return []any{}
	}
	return out[w.skip:min(len(out), w.skip+w.count)]
}

// razorpayCollection is a listing's answer.
func razorpayCollection(items []any) map[string]any {
	return map[string]any{"entity": "collection", "count": len(items), "items": items}
}

func (f *razorpayFace) listPayments(w http.ResponseWriter, r *http.Request) error {
	win, err := readRazorpayWindow(r.URL.Query())
	if err != nil {
		return err
	}
	var items []any
	var at []int64
	all := f.g.Intents()
	slices.SortStableFunc(all, func(a, b Intent) int { return b.SettledAt.Compare(a.SettledAt) }) // newest payment first
	for _, in := range all {
		if in.Status == StatusSucceeded {
			items = append(items, razorpayPayment(in))
			at = append(at, in.SettledAt.Unix())
		}
	}
	writeJSON(w, http.StatusOK, razorpayCollection(win.page(items, at)))
	return nil
}

// getPayment answers Fetch a Payment (GET /v1/payments/{id}): the payment
// entity of a paid link.
func (f *razorpayFace) getPayment(w http.ResponseWriter, r *http.Request) error {
	in, err := f.paymentIntent(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, razorpayPayment(in))
	return nil
}

func (f *razorpayFace) listRefunds(w http.ResponseWriter, r *http.Request) error {
	win, err := readRazorpayWindow(r.URL.Query())
	if err != nil {
		return err
	}
	in, err := f.paymentIntent(r.PathValue("id"))
	if err != nil {
		return err
	}
	var items []any
	var at []int64
	for _, re := range in.Refunds { // oldest first
		items = append(items, razorpayRefund(in, re))
		at = append(at, re.CreatedAt.Unix())
	}
	writeJSON(w, http.StatusOK, razorpayCollection(win.page(items, at)))
	return nil
}

func (f *razorpayFace) createRefund(w http.ResponseWriter, r *http.Request) error {
	m, err := readRazorpayBody(w, r, "amount", "speed", "notes", "receipt")
	if err != nil {
		return err
	}
	key := r.Header.Get("X-Refund-Idempotency")
	if len(r.Header.Values("X-Refund-Idempotency")) > 0 && !razorpayIdemRE.MatchString(key) {
		return razorpayBad("", "The idempotency key must be at least 10 characters of letters, digits, underscores and hyphens.")
	}
	in, err := f.paymentIntent(r.PathValue("id"))
	if err != nil {
		return err
	}
	params := url.Values{}
	amount, hasAmount, err := m.integer("amount")
	if err != nil {
		return err
	}
	switch {
	case hasAmount && amount < razorpayMinAmount:
		return razorpayBad("amount", "The amount must be at least INR 1.00")
	case hasAmount:
		params.Set("amount", strconv.FormatInt(amount, 10))
	default:
		amount = in.AmountMinor // "the entire payment amount will be refunded"
	}
	switch speed, ok, err := m.str("speed"); {
	case err != nil:
		return err
	case ok && speed != "normal" && speed != "optimum":
		return razorpayBad("speed", "The selected speed is invalid.")
	case ok:
		params.Set("speed", speed)
	}
	switch receipt, ok, err := m.str("receipt"); {
	case err != nil:
		return err
	case ok:
		params.Set("receipt", receipt)
	}
	notes, err := m.notes("notes")
	if err != nil {
		return err
	}
	for k, v := range notes {
		params.Set("notes["+k+"]", v)
	}
	if key == "" {
		key = "generated-" + randomHex(16)
	}
	left := in.AmountMinor - refunded(in.Refunds)
	re, _, err := f.g.refund(in.ID, "razorpay-refund:"+key, &amount, params.Encode())
	switch {
	case errors.Is(err, errIdempotencyUsed):
		return &razorpayError{status: http.StatusConflict, code: "BAD_REQUEST_ERROR",
			description: "Different request with the same idempotency key has already been processed."}
	case errors.Is(err, errRefundExceeds) && left <= 0:
		return razorpayBad("", "The payment has been fully refunded already")
	case errors.Is(err, errRefundExceeds):
		return razorpayBad("amount", "The refund amount provided is greater than amount captured")
	case err != nil:
		return err
	}
	now, _ := f.g.Intent(in.ID)
	writeJSON(w, http.StatusOK, razorpayRefund(now, re))
	return nil
}

// linkIntent is the intent of Payment Link id.
func (f *razorpayFace) linkIntent(id string) (Intent, error) {
	if !strings.HasPrefix(id, razorpayLinkPrefix) {
		return Intent{}, razorpayNoID
	}
	in, err := f.g.Intent(id)
	if errors.Is(err, ErrUnknownIntent) {
		return Intent{}, razorpayNoID
	}
	return in, err
}

// paymentIntent is the paid intent whose Payment is id: only a paid link
// has one.
func (f *razorpayFace) paymentIntent(id string) (Intent, error) {
	hex, ok := strings.CutPrefix(id, razorpayPaymentPrefix)
	if !ok {
		return Intent{}, razorpayNoID
	}
	in, err := f.g.Intent(razorpayLinkPrefix + hex)
	if err != nil || in.Status != StatusSucceeded {
		return Intent{}, razorpayNoID
	}
	return in, nil
}
