package sandboxgateway

import (
	"bytes"
	"crypto/rand"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// pageData is what the pay page shows.
type pageData struct {
	Intent
	Amount   string // "INR 1234.50"
	Done     bool   // the intent has its final status
	KeyParam string // payKeyParam
	Nonce    string // the Content-Security-Policy nonce of this answer's script and style
}

// pageTemplate is the hosted pay page: self-contained, no external assets.
// Its buttons call the sandbox pay and fail endpoints with the pay key
// from the page's own URL fragment (pay_url's "#key=..."), the only
// credential a shopper has. Pay sends the #payer field ("UPI ID"), when
// filled in, as the payer "upi:<UPI ID>" (trimmed and lower-cased: a VPA
// is case-insensitive, and a real gateway reports it one way); left
// empty, it sends no body and the gateway gives the intent a payer of its
// own. #pay-result then says "Payment succeeded." or "Payment failed." (or
// why neither happened) and carries the status in data-status; #return-link, present when the intent has a return_url,
// appears once the payment is settled. Its inline style and script run
// under pagePolicy by carrying the answer's nonce.
var pageTemplate = template.Must(template.New("pay").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sandbox UPI payment</title>
<style nonce="{{.Nonce}}">
body { font-family: system-ui, sans-serif; background: #f3f4f6; margin: 0; padding: 2rem 1rem; color: #111827; }
main { max-width: 26rem; margin: 0 auto; background: #fff; border-radius: 12px; padding: 1.5rem; box-shadow: 0 1px 4px rgba(0,0,0,.1); }
h1 { font-size: 1.2rem; margin: 0 0 .25rem; }
.note { color: #6b7280; font-size: .85rem; margin: 0 0 1rem; }
.amount { font-size: 2rem; font-weight: 600; margin: .5rem 0 1rem; }
dl { display: grid; grid-template-columns: auto 1fr; gap: .25rem 1rem; margin: 0 0 1.5rem; font-size: .9rem; }
dt { color: #6b7280; } dd { margin: 0; overflow-wrap: anywhere; }
label { display: block; font-size: .9rem; color: #6b7280; margin: 0 0 .25rem; }
#payer { box-sizing: border-box; width: 100%; font-size: 1rem; padding: .6rem; border: 1px solid #d1d5db; border-radius: 8px; margin: 0 0 1rem; }
.buttons { display: flex; gap: .75rem; }
button { flex: 1; font-size: 1rem; padding: .75rem; border: 0; border-radius: 8px; cursor: pointer; color: #fff; }
button:disabled { opacity: .5; cursor: default; }
#pay-button { background: #059669; } #fail-button { background: #dc2626; }
#pay-result { min-height: 1.5rem; margin: 1rem 0 .5rem; font-weight: 600; }
</style>
</head>
<body>
<main>
<h1>Sandbox UPI payment</h1>
<p class="note">A test gateway: no money moves.</p>
<div class="amount" id="amount">{{.Amount}}</div>
<dl>
{{- with index .Metadata "order_id"}}
<dt>Order</dt><dd id="order-id">{{.}}</dd>
{{- end}}
<dt>Payment</dt><dd id="intent-id">{{.ID}}</dd>
</dl>
<label for="payer">UPI ID</label>
<input id="payer" type="text" name="payer" placeholder="name@bank" maxlength="96" autocomplete="off" autocapitalize="none" spellcheck="false"{{if .Done}} disabled{{end}}>
<div class="buttons">
<button id="pay-button" type="button"{{if .Done}} disabled{{end}}>Pay</button>
<button id="fail-button" type="button"{{if .Done}} disabled{{end}}>Fail</button>
</div>
<p id="pay-result" role="status" data-status="{{.Status}}">{{if .Done}}Payment {{.Status}}.{{end}}</p>
{{- if .ReturnURL}}
<p><a id="return-link" href="{{.ReturnURL}}"{{if not .Done}} hidden{{end}}>Back to the shop</a></p>
{{- end}}
</main>
<script nonce="{{.Nonce}}">
(() => {
  const base = "/sandbox/intents/" + encodeURIComponent({{.ID}});
  const key = new URLSearchParams(location.hash.slice(1)).get({{.KeyParam}}) || "";
  const result = document.getElementById("pay-result");
  const payer = document.getElementById("payer");
  const payButton = document.getElementById("pay-button"), failButton = document.getElementById("fail-button");
  const controls = [payButton, failButton, payer];
  const back = document.getElementById("return-link");
  const settle = (status, text) => {
    result.dataset.status = status;
    result.textContent = text;
    controls.forEach((c) => { c.disabled = true; });
    if (back) back.hidden = false;
  };
  const act = async (action) => {
    const req = { method: "POST", headers: { Authorization: "Bearer " + key } };
    const upi = payer.value.trim().toLowerCase();
    if (action === "pay" && upi !== "") {
      req.headers["Content-Type"] = "application/json";
      req.body = JSON.stringify({ payer: "upi:" + upi });
    }
    controls.forEach((c) => { c.disabled = true; });
    result.textContent = "Working…";
    try {
      const res = await fetch(base + "/" + action, req);
      const body = await res.json().catch(() => ({}));
      if (res.ok) {
        settle(body.status, "Payment " + body.status + ".");
      } else if (body.error === "intent_failed") {
        settle("failed", "Payment failed earlier; it cannot be paid now.");
      } else if (body.error === "intent_succeeded") {
        settle("succeeded", "Payment succeeded earlier; it cannot fail now.");
      } else if (res.status === 401) {
        result.textContent = "This payment link is incomplete: open it exactly as the shop gave it.";
        controls.forEach((c) => { c.disabled = false; });
      } else {
        result.textContent = (body.message || "The gateway answered " + res.status) + ". Try again.";
        controls.forEach((c) => { c.disabled = false; });
      }
    } catch (e) {
      result.textContent = "Network error. Try again.";
      controls.forEach((c) => { c.disabled = false; });
    }
  };
  payButton.addEventListener("click", () => act("pay"));
  failButton.addEventListener("click", () => act("fail"));
})();
</script>
</body>
</html>
`))

// notFoundPage answers a pay page for an unknown intent.
const notFoundPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Unknown payment</title></head>
<body><h1>Unknown payment</h1><p>This payment link is not valid.</p></body></html>
`

// pagePolicy is the Content-Security-Policy of every HTML answer, for a
// nonce: nothing loads but the page's own inline style and script (those
// carrying the nonce), which may call this origin alone; no <base>, no
// form posts, and no framing, so that no other site can lay the page under
// its own and lead a shopper's click onto Pay.
func pagePolicy(nonce string) string {
	return "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce + "'; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// setPageHeaders sets the headers of every HTML answer: HTML, not cached,
// not sniffed, pagePolicy for nonce, never framed (X-Frame-Options for
// browsers without frame-ancestors), and no Referer, since the page's
// address names the intent.
func setPageHeaders(h http.Header, nonce string) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", pagePolicy(nonce))
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// handlePage serves the pay page of intent {id}.
func (g *Gateway) handlePage(w http.ResponseWriter, r *http.Request) {
	nonce := rand.Text() // 128 random bits, fresh for every answer
	setPageHeaders(w.Header(), nonce)
	in, err := g.Intent(r.PathValue("id"))
	if err != nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(notFoundPage))
		return
	}
	var buf bytes.Buffer
	data := pageData{Intent: in, Amount: formatAmount(in.AmountMinor, in.Currency), Done: in.Status != StatusRequiresPayment,
		KeyParam: payKeyParam, Nonce: nonce}
	if err := pageTemplate.Execute(&buf, data); err != nil {
		g.log.Error("render pay page", "intent_id", in.ID, "err", err)
		http.Error(w, "the pay page failed to render", http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(buf.Bytes())
}

// minorDigits gives the currencies whose minor unit is not a hundredth.
var minorDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}

// formatAmount writes an amount in minor units as the currency code and the
// major amount, without grouping: 123450 INR is "INR 1234.50".
func formatAmount(minor int64, currency string) string {
	digits, ok := minorDigits[currency]
	if !ok {
		digits = 2
	}
	sign := ""
	u := uint64(minor)
	if minor < 0 {
		sign, u = "-", uint64(-minor)
	}
	s := strconv.FormatUint(u, 10)
	if digits == 0 {
		return currency + " " + sign + s
	}
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	return currency + " " + sign + s[:len(s)-digits] + "." + s[len(s)-digits:]
}
