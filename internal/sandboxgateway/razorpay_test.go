package sandboxgateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
	"github.com/flashgate/flashgate/internal/testenv"
)

// The Razorpay personality through its HTTP API, as Razorpay's pages
// describe each call. The origin's adapter runs against it in
// origin/internal/app/razorpay_sandbox_test.go (the adapter is internal to
// the origin).

// startRazorpay serves a gateway playing Razorpay on clk, edit adjusting
// its config.
func startRazorpay(t *testing.T, clk *clock.Fake, edit func(*Config)) *fixture {
	t.Helper()
	return start(t, func(c *Config) {
		c.Personality = PersonalityRazorpay
		if clk != nil {
			c.Clock = clk
		}
		if edit != nil {
			edit(c)
		}
	})
}

// rzpAuth is the basic auth of the personality's key.
var rzpAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(RazorpayKeyID+":"+testAPIKey))

// rzp calls the Razorpay API with the key, and the headers given as name,
// value pairs.
func (f *fixture) rzp(t *testing.T, method, path, body string, headers ...string) (int, []byte) {
	t.Helper()
	return send(t, method, f.url+path, body, append([]string{"Authorization", rzpAuth}, headers...)...)
}

// rzpError is a Razorpay error body's error, failing t when b is not one.
func rzpError(t *testing.T, b []byte) (code, description, field string) {
	t.Helper()
	var e struct {
		Error struct {
			Code        *string        `json:"code"`
			Description *string        `json:"description"`
			Field       string         `json:"field"`
			Metadata    map[string]any `json:"metadata"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == nil || e.Error.Description == nil || e.Error.Metadata == nil {
		t.Fatalf("error body %s is not Razorpay's {error: {code, description, metadata, ...}} (%v)", b, err)
	}
	return *e.Error.Code, *e.Error.Description, e.Error.Field
}

// linkBody is the body the origin's adapter sends for an order.
func linkBody(ref string, expireBy time.Time) string {
	return fmt.Sprintf(`{"amount":4999900,"currency":"INR","reference_id":%q,"description":"Order %s","expire_by":%d,`+
		`"notes":{"order_id":%q},"callback_url":"https://shop.example/orders/%s","callback_method":"get","reminder_enable":false}`,
		ref, ref, expireBy.Unix(), ref, ref)
}

// rzpLink is the part of a Payment Link the tests read.
type rzpLink struct {
	ID          string            `json:"id"`
	Amount      int64             `json:"amount"`
	AmountPaid  int64             `json:"amount_paid"`
	Currency    string            `json:"currency"`
	Status      string            `json:"status"`
	ReferenceID string            `json:"reference_id"`
	ShortURL    string            `json:"short_url"`
	CallbackURL string            `json:"callback_url"`
	ExpireBy    int64             `json:"expire_by"`
	CancelledAt int64             `json:"cancelled_at"`
	ExpiredAt   int64             `json:"expired_at"`
	Notes       map[string]string `json:"notes"`
	Payments    []struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
		Method    string `json:"method"`
		Status    string `json:"status"`
	} `json:"payments"`
}

// rzpPayment is the part of a Payment the tests read.
type rzpPayment struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	Method         string `json:"method"`
	VPA            string `json:"vpa"`
	AmountRefunded int64  `json:"amount_refunded"`
	RefundStatus   any    `json:"refund_status"`
	OrderID        string `json:"order_id"`
	CreatedAt      int64  `json:"created_at"`
}

// rzpRefund is the part of a Refund the tests read.
type rzpRefund struct {
	ID        string `json:"id"`
	Amount    int64  `json:"amount"`
	PaymentID string `json:"payment_id"`
	Receipt   any    `json:"receipt"`
	Status    string `json:"status"`
}

// rzpCollection is a listing.
type rzpCollection[T any] struct {
	Entity string `json:"entity"`
	Count  int    `json:"count"`
	Items  []T    `json:"items"`
}

func (f *fixture) mustLink(t *testing.T, ref string, expireBy time.Time) rzpLink {
	t.Helper()
	status, b := f.rzp(t, "POST", "/v1/payment_links", linkBody(ref, expireBy))
	if status != 200 {
		t.Fatalf("create link %s = %d %s, want 200", ref, status, b)
	}
	return decode[rzpLink](t, b)
}

// rzpWebhook waits for the webhook of event typ about the link, checks its
// headers and signature, and returns it.
func rzpWebhook(t *testing.T, f *fixture, typ string) received {
	t.Helper()
	var got received
	testenv.Eventually(t, 5*time.Second, typ+" webhook", func() bool {
		for _, r := range f.hooks.requests() {
			var e struct{ Event string }
			if json.Unmarshal(r.body, &e) == nil && e.Event == typ {
				got = r
				return true
			}
		}
		return false
	})
	checkRazorpayHook(t, typ, got)
	return got
}

// checkRazorpayHook checks the headers and signature of webhook got of
// event typ.
func checkRazorpayHook(t *testing.T, typ string, got received) {
	t.Helper()
	m := hmac.New(sha256.New, []byte(testSecrets[0]))
	m.Write(got.body)
	if sig := got.header.Get(RazorpaySignatureHeader); sig != hex.EncodeToString(m.Sum(nil)) {
		t.Errorf("%s %s = %q, want the hex HMAC-SHA256 of the body under the first secret", typ, RazorpaySignatureHeader, sig)
	}
	if id := got.header.Get(RazorpayEventIDHeader); !strings.HasPrefix(id, "evt_") {
		t.Errorf("%s %s = %q, want the event's id", typ, RazorpayEventIDHeader, id)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s Content-Type = %q, want application/json", typ, ct)
	}
}

// A link's whole life: made as the adapter makes it, paid by a UPI payer,
// payment_link.paid with its link, order and payment, the payment listed
// and refunded once under X-Refund-Idempotency, refund.processed, and the
// payment refunded.
func TestRazorpayLinkJourney(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	f := startRazorpay(t, clk, nil)
	expireBy := clk.Now().Add(16 * time.Minute)
	l := f.mustLink(t, "ord-1", expireBy)
	if !strings.HasPrefix(l.ID, "plink_") || l.Status != "created" || l.Amount != 4999900 || l.AmountPaid != 0 || l.Currency != "INR" ||
		l.ReferenceID != "ord-1" || l.ExpireBy != expireBy.Unix() || l.Notes["order_id"] != "ord-1" ||
		l.CallbackURL != "https://shop.example/orders/ord-1" || l.Payments != nil {
		t.Errorf("created link = %+v, want a created plink_ of 4999900 INR for ord-1", l)
	}
	if !strings.HasPrefix(l.ShortURL, f.url+"/pay/"+l.ID+"#key=pk_") {
		t.Errorf("short_url = %q, want the sandbox pay page", l.ShortURL)
	}

	clk.Advance(time.Minute)
	if _, err := f.gw.PayAs(l.ID, "upi:alice@okbank"); err != nil {
		t.Fatal(err)
	}
	hook := rzpWebhook(t, f, "payment_link.paid")
	var paid struct {
		Entity   string   `json:"entity"`
		Account  string   `json:"account_id"`
		Contains []string `json:"contains"`
		Payload  struct {
			PaymentLink struct{ Entity rzpLink }    `json:"payment_link"`
			Payment     struct{ Entity rzpPayment } `json:"payment"`
			Order       struct {
				Entity struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				}
			} `json:"order"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(hook.body, &paid); err != nil {
		t.Fatal(err)
	}
	pl, pay := paid.Payload.PaymentLink.Entity, paid.Payload.Payment.Entity
	if paid.Entity != "event" || strings.Join(paid.Contains, ",") != "payment_link,order,payment" || pl.ID != l.ID || pl.Status != "paid" ||
		pl.AmountPaid != 4999900 || pay.Status != "captured" || pay.Method != "upi" || pay.VPA != "alice@okbank" ||
		pay.Amount != 4999900 || pay.OrderID != paid.Payload.Order.Entity.ID || paid.Payload.Order.Entity.Status != "paid" ||
		pay.CreatedAt != clk.Now().Unix() {
		t.Errorf("payment_link.paid = %s", hook.body)
	}
	status, b := f.rzp(t, "GET", "/v1/payment_links/"+l.ID, "")
	if got := decode[rzpLink](t, b); status != 200 || got.Status != "paid" || len(got.Payments) != 1 ||
		got.Payments[0].PaymentID != pay.ID || got.Payments[0].Status != "captured" || got.Payments[0].Method != "upi" {
		t.Errorf("fetch paid link = %d %s", status, b)
	}
	status, b = f.rzp(t, "GET", "/v1/payment_links?payment_id="+pay.ID, "")
	if got := decode[struct {
		PaymentLinks []rzpLink `json:"payment_links"`
	}](t, b); status != 200 || len(got.PaymentLinks) != 1 || got.PaymentLinks[0].ID != l.ID {
		t.Errorf("links of payment %s = %d %s, want %s", pay.ID, status, b, l.ID)
	}

	refund := `{"amount":4999900,"speed":"normal","receipt":"refund-ord-1"}`
	status, b = f.rzp(t, "POST", "/v1/payments/"+pay.ID+"/refund", refund, "X-Refund-Idempotency", "refund-ord-1")
	r1 := decode[rzpRefund](t, b)
	if status != 200 || !strings.HasPrefix(r1.ID, "rfnd_") || r1.Amount != 4999900 || r1.PaymentID != pay.ID ||
		r1.Receipt != "refund-ord-1" || r1.Status != "processed" {
		t.Errorf("refund = %d %s, want a processed refund of 4999900", status, b)
	}
	status, b = f.rzp(t, "POST", "/v1/payments/"+pay.ID+"/refund", refund, "X-Refund-Idempotency", "refund-ord-1")
	if r2 := decode[rzpRefund](t, b); status != 200 || r2.ID != r1.ID {
		t.Errorf("refund replayed = %d %s, want %s again", status, b, r1.ID)
	}
	status, b = f.rzp(t, "POST", "/v1/payments/"+pay.ID+"/refund", `{"amount":100}`, "X-Refund-Idempotency", "refund-ord-1")
	if code, desc, _ := rzpError(t, b); status != 409 || code != "BAD_REQUEST_ERROR" || !strings.Contains(desc, "same idempotency key") {
		t.Errorf("refund with the key and another body = %d %s, want 409", status, b)
	}
	status, b = f.rzp(t, "POST", "/v1/payments/"+pay.ID+"/refund", `{"amount":100}`, "X-Refund-Idempotency", "refund-ord-1-b")
	if _, desc, _ := rzpError(t, b); status != 400 || desc != "The payment has been fully refunded already" {
		t.Errorf("refund of a refunded payment = %d %s, want 400", status, b)
	}
	status, b = f.rzp(t, "GET", "/v1/payments/"+pay.ID+"/refunds?count=100&skip=0", "")
	if got := decode[rzpCollection[rzpRefund]](t, b); status != 200 || got.Entity != "collection" || got.Count != 1 || got.Items[0].ID != r1.ID {
		t.Errorf("refunds of %s = %d %s, want %s", pay.ID, status, b, r1.ID)
	}
	hook = rzpWebhook(t, f, "refund.processed")
	var processed struct {
		Payload struct {
			Refund  struct{ Entity rzpRefund }  `json:"refund"`
			Payment struct{ Entity rzpPayment } `json:"payment"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(hook.body, &processed); err != nil {
		t.Fatal(err)
	}
	if p := processed.Payload; p.Refund.Entity.ID != r1.ID || p.Payment.Entity.Status != "refunded" || p.Payment.Entity.AmountRefunded != 4999900 ||
		p.Payment.Entity.RefundStatus != "full" {
		t.Errorf("refund.processed = %s", hook.body)
	}
	status, b = f.rzp(t, "GET", "/v1/payments?from="+strconv.FormatInt(clk.Now().Unix(), 10)+"&count=100&skip=0", "")
	if got := decode[rzpCollection[rzpPayment]](t, b); status != 200 || got.Count != 1 || got.Items[0].ID != pay.ID || got.Items[0].Status != "refunded" {
		t.Errorf("payments = %d %s, want %s refunded", status, b, pay.ID)
	}
	status, b = f.rzp(t, "GET", "/v1/payments/"+pay.ID, "")
	if got := decode[rzpPayment](t, b); status != 200 || got.ID != pay.ID || got.Status != "refunded" || got.AmountRefunded != 4999900 {
		t.Errorf("GET /v1/payments/%s = %d %s, want it refunded", pay.ID, status, b)
	}
	if status, b = f.rzp(t, "GET", "/v1/payments/pay_nope", ""); status != 400 {
		t.Errorf("GET /v1/payments/pay_nope = %d %s, want 400", status, b)
	}
}

// Links end cancelled (by the merchant's cancel) or expired (failed on the
// page or by /fail), each with its webhook; a link that is not created
// cannot be cancelled; a payer that is not UPI pays from a VPA of its own.
func TestRazorpayLinkEnds(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	f := startRazorpay(t, clk, nil)
	a := f.mustLink(t, "ord-a", clk.Now().Add(20*time.Minute))
	b := f.mustLink(t, "ord-b", clk.Now().Add(20*time.Minute))
	c := f.mustLink(t, "ord-c", clk.Now().Add(20*time.Minute))

	status, body := f.rzp(t, "POST", "/v1/payment_links/"+a.ID+"/cancel", "")
	if got := decode[rzpLink](t, body); status != 200 || got.Status != "cancelled" || got.CancelledAt != clk.Now().Unix() {
		t.Errorf("cancel = %d %s, want cancelled", status, body)
	}
	hook := rzpWebhook(t, f, "payment_link.cancelled")
	if !strings.Contains(string(hook.body), `"id":"`+a.ID+`"`) {
		t.Errorf("payment_link.cancelled = %s, want about %s", hook.body, a.ID)
	}
	status, body = f.rzp(t, "POST", "/v1/payment_links/"+a.ID+"/cancel", "")
	if code, _, _ := rzpError(t, body); status != 400 || code != "BAD_REQUEST_ERROR" {
		t.Errorf("cancel again = %d %s, want 400", status, body)
	}

	if _, err := f.gw.Fail(b.ID); err != nil {
		t.Fatal(err)
	}
	hook = rzpWebhook(t, f, "payment_link.expired")
	if !strings.Contains(string(hook.body), `"status":"expired"`) || !strings.Contains(string(hook.body), `"id":"`+b.ID+`"`) {
		t.Errorf("payment_link.expired = %s, want %s expired", hook.body, b.ID)
	}

	if _, err := f.gw.PayAs(c.ID, "card:4242"); err != nil {
		t.Fatal(err)
	}
	status, body = f.rzp(t, "POST", "/v1/payment_links/"+c.ID+"/cancel", "")
	if _, desc, _ := rzpError(t, body); status != 400 || !strings.Contains(desc, "paid") {
		t.Errorf("cancel a paid link = %d %s, want 400", status, body)
	}
	status, body = f.rzp(t, "GET", "/v1/payments", "")
	got := decode[rzpCollection[rzpPayment]](t, body)
	if status != 200 || got.Count != 1 || got.Items[0].VPA != RazorpayVPA("card:4242") || !strings.HasSuffix(got.Items[0].VPA, "@sandbox") {
		t.Errorf("payments = %d %s, want one from %s", status, body, RazorpayVPA("card:4242"))
	}
	if RazorpayVPA("card:4242") != RazorpayVPA("card:4242") || RazorpayVPA("card:4242") == RazorpayVPA("card:4243") {
		t.Errorf("RazorpayVPA is not one VPA per payer")
	}
}

// What Razorpay refuses, it refuses in its shape.
func TestRazorpayRefusals(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	f := startRazorpay(t, clk, nil)
	l := f.mustLink(t, "ord-1", clk.Now().Add(20*time.Minute))
	if _, err := f.gw.Pay(l.ID); err != nil {
		t.Fatal(err)
	}
	payID := "pay_" + strings.TrimPrefix(l.ID, "plink_")
	wrongKey := "Basic " + base64.StdEncoding.EncodeToString([]byte("rzp_test_SomeoneElse00:"+testAPIKey))
	soon := clk.Now().Add(14 * time.Minute)
	tests := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		desc, field              string
	}{
		{"reference reused", "POST", "/v1/payment_links", linkBody("ord-1", clk.Now().Add(time.Hour)), nil, 400,
			"payment link creation with reference ID already attempted", "reference_id"},
		{"expire_by too soon", "POST", "/v1/payment_links", linkBody("ord-2", soon), nil, 400,
			"timestamp must be atleast 15 minutes in future", "expire_by"},
		{"unknown field", "POST", "/v1/payment_links", `{"amount":100,"colour":"red"}`, nil, 400,
			"colour is/are not required and should not be sent", "colour"},
		{"amount below 1.00", "POST", "/v1/payment_links", `{"amount":99}`, nil, 400, "The amount must be at least INR 1.00", "amount"},
		{"callback without method", "POST", "/v1/payment_links", `{"amount":100,"callback_url":"https://shop.example/"}`, nil, 400,
			"The callback method field is required when callback url is present.", "callback_method"},
		{"upi link not in INR", "POST", "/v1/payment_links", `{"amount":100,"currency":"USD","upi_link":true}`, nil, 400,
			"upi is currently supported only in indian currency", "currency"},
		{"too many notes", "POST", "/v1/payment_links", `{"amount":100,"notes":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9","j":"10","k":"11","l":"12","m":"13","n":"14","o":"15","p":"16"}}`, nil, 400,
			"Number of fields in notes should be less than or equal to 15", "notes"},
		{"unknown link", "GET", "/v1/payment_links/plink_nope", "", nil, 400, "The id provided does not exist", ""},
		{"links by another filter", "GET", "/v1/payment_links?status=paid", "", nil, 400, "status is/are not required and should not be sent", "status"},
		{"count over 100", "GET", "/v1/payments?count=101", "", nil, 400, "count must be between 1 and 100", "count"},
		{"from before 2000", "GET", "/v1/payments?from=1", "", nil, 400, "from must be between 946684800 and 4765046400", "from"},
		{"refund of an unknown payment", "POST", "/v1/payments/pay_nope/refund", `{}`, nil, 400, "The id provided does not exist", ""},
		{"refund over the amount", "POST", "/v1/payments/" + payID + "/refund", `{"amount":5000000}`, nil, 400,
			"The refund amount provided is greater than amount captured", "amount"},
		{"short idempotency key", "POST", "/v1/payments/" + payID + "/refund", `{}`, []string{"X-Refund-Idempotency", "short"}, 400,
			"The idempotency key must be at least 10 characters of letters, digits, underscores and hyphens.", ""},
		{"wrong key id", "GET", "/v1/payments", "", []string{"Authorization", wrongKey}, 401, "The api key provided is invalid", ""},
		{"bearer instead of basic auth", "GET", "/v1/payments", "", []string{"Authorization", "Bearer " + testAPIKey}, 401, "The api key provided is invalid", ""},
		{"unknown route", "GET", "/v1/orders", "", nil, 400, "The requested URL was not found on the server.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := f.rzp(t, tt.method, tt.path, tt.body, tt.headers...)
			code, desc, field := rzpError(t, b)
			if status != tt.status || code != "BAD_REQUEST_ERROR" || desc != tt.desc || field != tt.field {
				t.Errorf("%s %s = %d %s, want %d %q (field %q)", tt.method, tt.path, status, b, tt.status, tt.desc, tt.field)
			}
		})
	}
	if n := len(f.gw.Intents()); n != 1 {
		t.Errorf("links = %d, want only the first", n)
	}
}

// The payments listing: newest first, from and to inclusive, count and
// skip; links nobody paid are not payments.
func TestRazorpayPaymentsListing(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	f := startRazorpay(t, clk, nil)
	var ids []string
	for i := range 3 {
		l := f.mustLink(t, fmt.Sprintf("ord-%d", i), clk.Now().Add(time.Hour))
		clk.Advance(10 * time.Second)
		if _, err := f.gw.Pay(l.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, "pay_"+strings.TrimPrefix(l.ID, "plink_"))
	}
	f.mustLink(t, "ord-unpaid", clk.Now().Add(time.Hour))
	start := clk.Now().Add(-30 * time.Second).Unix()
	list := func(q string) []string {
		t.Helper()
		status, b := f.rzp(t, "GET", "/v1/payments?"+q, "")
		if status != 200 {
			t.Fatalf("payments?%s = %d %s", q, status, b)
		}
		var out []string
		for _, p := range decode[rzpCollection[rzpPayment]](t, b).Items {
			out = append(out, p.ID)
		}
		return out
	}
	for _, tt := range []struct {
		q    string
		want []string
	}{
		{"", []string{ids[2], ids[1], ids[0]}},
		{"count=2", []string{ids[2], ids[1]}},
		{"count=2&skip=2", []string{ids[0]}},
		{"skip=3", nil},
		{fmt.Sprintf("from=%d", start+20), []string{ids[2], ids[1]}},
		{fmt.Sprintf("to=%d", start+20), []string{ids[1], ids[0]}},
	} {
		if got := list(tt.q); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("payments?%s = %v, want %v", tt.q, got, tt.want)
		}
	}
}

// The core's injected outage is Razorpay's SERVER_ERROR.
func TestRazorpayOutage(t *testing.T) {
	t.Parallel()
	f := startRazorpay(t, nil, func(c *Config) { c.FailureRate = 1 })
	status, b := f.rzp(t, "GET", "/v1/payments", "")
	if code, _, _ := rzpError(t, b); status != http.StatusServiceUnavailable || code != "SERVER_ERROR" {
		t.Errorf("payments in an outage = %d %s, want 503 SERVER_ERROR", status, b)
	}
}
