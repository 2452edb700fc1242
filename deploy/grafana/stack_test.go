package grafana

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flashgate/flashgate/internal/childproc"
	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// moduleRoot is the repository's root, from this package's folder.
const moduleRoot = "../.."

// client is the test's HTTP client of the edge and the gateway; each call has its budget.
var client = &http.Client{Timeout: 10 * time.Second}

// edgeAdminToken is the admin bearer token of the test's edge: 32 random bytes in base64, as the edge requires.
const edgeAdminToken = "qzH0mR3k2M9vTq7yLw1bXc5nUe8sJd4fGa6hPi0oVlY="

// family is what the dashboard's checks need of one exported metric family: its type and every label name its
// series carry (a histogram's le left out).
type family struct {
	kind   dto.MetricType
	labels map[string]bool
}

// scrape is one binary's GET /metrics, parsed: its flashgate_ families by name.
type scrape struct {
	binary   string
	families map[string]family
}

// parseScrape reads the text exposition format; only flashgate_ families are kept.
func parseScrape(binary string, body []byte) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return scrape{}, fmt.Errorf("%s /metrics: %w", binary, err)
	}
	s := scrape{binary: binary, families: map[string]family{}}
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "flashgate_") {
			continue
		}
		f := family{kind: mf.GetType(), labels: map[string]bool{}}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				f.labels[l.GetName()] = true
			}
		}
		s.families[name] = f
	}
	return s, nil
}

// runningStack starts a real origin (in this process, with a sandbox payment gateway) and a real edge (the
// binary, built from ./edge, dialling the origin over TCP), drives sales through both far enough that every
// labelled family the dashboard reads has a series — a vector nobody has touched is absent from /metrics — and
// returns both scrapes. The events come from a paid order through the edge, a payment whose webhook is lost,
// a sold-out reserve, a payment for no order, a sale Redis loses, and a bot tarpitted for forged proofs of work.
//
// The edge runs as its binary because Go's internal rule keeps edge/internal (and its test helpers) out of
// reach of deploy/; the origin's test helpers (origin/origintest) are public to the module.
func runningStack(t *testing.T) []scrape {
	t.Helper()
	env := origintest.NewEnv(t)
	pay := origintest.StartPayments(t)
	o := origintest.StartOrigin(t, env, pay.Configure)
	pay.DeliverTo(o)
	originURL := "http://" + httpreadtest.Serve(t, o.App.PublicServer())

	suffix := testenv.RandomHex(3)
	sale, guarded, lost := "graf-"+suffix, "graf-guarded-"+suffix, "graf-lost-"+suffix
	for _, id := range []string{sale, guarded, lost} {
		o.MustCreateSale(t, origintest.OpenSale(id, 2, 600))
	}
	e := startEdge(t, originURL)
	e.waitSale(t, sale)
	e.waitSale(t, guarded)

	// One shopper through the edge: join, admission, reserve, order; the
	// gateway pays and its webhook settles the order.
	users := tokens.NewDevUserIssuer(tokenstest.UserSecret(), "", 0, nil)
	alice := mustIssue(t, users, "alice")
	admission := e.admitted(t, sale, alice)
	var held struct {
		ReservationID string `json:"reservation_id"`
	}
	e.mustDo(t, http.MethodPost, "/v1/sales/"+sale+"/reserve", admission, alice,
		`{"sku":"sku-1","idempotency_key":"alice-1"}`, http.StatusCreated, &held)
	var order origintest.Order
	e.mustDo(t, http.MethodPost, "/v1/orders", alice, "",
		fmt.Sprintf(`{"reservation_id":%q,"idempotency_key":"alice-order"}`, held.ReservationID), http.StatusCreated, &order)
	if order.Payment == nil {
		t.Fatalf("order %+v has no payment", order)
	}
	if _, err := pay.Gateway.Pay(order.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, o.UserToken(t, "alice"), order.OrderID, "paid", 15*time.Second)

	// A second shopper pays while the gateway's webhooks are lost: the
	// reconciler finds the payment and repairs the order.
	bobToken := o.UserToken(t, "bob")
	status, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, "bob"), "sku-1", "bob-1")
	if status != http.StatusCreated {
		t.Fatalf("Reserve(bob) = %d %+v, want 201", status, r)
	}
	status, bobOrder := o.CreateOrder(t, bobToken, r.ReservationID, "bob-order")
	if status != http.StatusCreated || bobOrder.Payment == nil {
		t.Fatalf("CreateOrder(bob) = %d %+v, want 201 with a payment", status, bobOrder)
	}
	pay.Gateway.SetWebhooksEnabled(false)
	if _, err := pay.Gateway.Pay(bobOrder.Payment.IntentID); err != nil {
		t.Fatal(err)
	}
	o.WaitOrder(t, bobToken, bobOrder.OrderID, "paid", 15*time.Second)
	pay.Gateway.SetWebhooksEnabled(true)

	// Both units are held or sold: the next shopper is told sold_out.
	if status, r := o.Reserve(t, sale, o.AdmissionToken(t, sale, "carol"), "sku-1", "carol-1"); status != http.StatusConflict || r.Error != "sold_out" {
		t.Fatalf("Reserve(carol) = %d %+v, want 409 sold_out", status, r)
	}

	// A payment for an order the origin never made: a payment alert.
	intent := gatewayIntent(t, pay, "ord_graf_unknown")
	if _, err := pay.Gateway.Pay(intent); err != nil {
		t.Fatal(err)
	}

	// Redis loses a sale's state: the origin finds it and rebuilds.
	loseSale(t, o, lost)

	// A bot on the guarded sale: a proof of work asked, forged solutions
	// refused, the offences tarpit the account.
	e.mustDo(t, http.MethodPut, "/admin/defences", edgeAdminToken, "",
		`{"tarpit":{"enabled":true,"offences":3,"hold_s":60}}`, http.StatusOK, nil)
	if status, b := e.do(t, http.MethodPut, "/admin/sales/"+guarded+"/admission", edgeAdminToken, "", `{"challenge_bits":4}`); status != http.StatusOK && status != http.StatusAccepted {
		t.Fatalf("edge PUT /admin/sales/%s/admission = %d %s, want 200 or 202", guarded, status, b)
	}
	e.tarpitted(t, guarded, mustIssue(t, users, "mallory"))

	originScrape := func() scrape {
		status, body := o.DoAdmin(t, origintest.Request{Method: http.MethodGet, Path: "/metrics", Token: origintest.AdminToken})
		if status != http.StatusOK {
			t.Fatalf("origin GET /metrics = %d", status)
		}
		s, err := parseScrape("origin", body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The events above that settle in the background (the reconciler's
	// repair, the webhook's alert, the loss found) show in the origin's
	// scrape within a few of their rounds.
	want := []string{"flashgate_reconcile_repairs_total", "flashgate_payment_alerts_total", "flashgate_redis_losses_total"}
	var s scrape
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("the origin's /metrics having %v after the events that make them", want), func() bool {
		s = originScrape()
		return len(absent(s, want)) == 0
	})
	return []scrape{s, e.scrape(t)}
}

func absent(s scrape, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := s.families[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

func mustIssue(t *testing.T, users *tokens.DevUserIssuer, account string) string {
	t.Helper()
	tok, err := users.Issue(account)
	if err != nil {
		t.Fatalf("Issue(%s) = %v", account, err)
	}
	return tok
}

// gatewayIntent makes a payment intent at the gateway, through its API, naming an order id of the caller's.
func gatewayIntent(t *testing.T, pay *origintest.Payments, orderID string) string {
	t.Helper()
	body := fmt.Sprintf(`{"amount_minor":100,"currency":"INR","metadata":{"order_id":%q}}`, orderID)
	req, err := http.NewRequest(http.MethodPost, pay.URL+"/v1/intents", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+pay.APIKey)
	req.Header.Set("Idempotency-Key", "graf-"+orderID)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/intents: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("POST /v1/intents: read the answer: %v", err)
	}
	var in struct {
		ID string `json:"intent_id"`
	}
	if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &in) != nil || in.ID == "" {
		t.Fatalf("POST /v1/intents = %d %s, want 201 with an intent", res.StatusCode, b)
	}
	return in.ID
}

// loseSale deletes every Redis key of a sale, as a restart without persistence would.
func loseSale(t *testing.T, o *origintest.Origin, sale string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := o.Env.Redis.Keys(ctx, o.Config.RedisPrefix+"{s:"+sale+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of sale %s: %v, %v", sale, keys, err)
	}
	if err := o.Env.Redis.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

// edge is a running edge binary.
type edge struct {
	public, admin string // http://127.0.0.1:port
	proc          *childproc.Proc
}

// startEdge builds ./edge and runs it against the origin at originURL, on its own Redis prefix, in dev mode
// with the tokenstest keys, until the test ends.
func startEdge(t *testing.T, originURL string) *edge {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "edge")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./edge")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./edge: %v\n%s", err, out)
	}
	r := testenv.NewRedis(t, testenv.RedisURL())
	publicAddr, adminAddr := httpreadtest.FreeAddr(t), httpreadtest.FreeAddr(t)
	e := &edge{public: "http://" + publicAddr, admin: "http://" + adminAddr}
	e.proc = &childproc.Proc{
		Name: "edge", Path: bin, Log: filepath.Join(dir, "edge.log"),
		Env: []string{
			"PATH=" + os.Getenv("PATH"),
			"FLASHGATE_EDGE_ADDR=" + publicAddr,
			"FLASHGATE_EDGE_ADMIN_ADDR=" + adminAddr,
			"FLASHGATE_REDIS_URL=" + r.URL,
			"FLASHGATE_REDIS_PREFIX=" + r.Prefix,
			"FLASHGATE_ORIGIN_URL=" + originURL,
			"FLASHGATE_LINE_AUDIENCE=" + tokenstest.LineAudience,
			"FLASHGATE_EDGE_ADMIN_TOKEN=" + edgeAdminToken,
			"FLASHGATE_DEV=true",
			"FLASHGATE_DEV_USER_TOKEN_SECRET=" + string(tokenstest.UserSecret()),
			"FLASHGATE_TOKEN_KEYS=" + tokenstest.KeySet().String(),
			"FLASHGATE_DEFAULT_RATE=1000",
			"FLASHGATE_TICK=20ms",
			"FLASHGATE_SNAPSHOT_REFRESH=50ms",
			"FLASHGATE_SHUTDOWN_TIMEOUT=5s",
		},
	}
	if err := e.proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.proc.Stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("edge log:\n%s", e.proc.Tail(40))
		}
	})
	// On a failure the cleanup above logs the edge's last lines.
	testenv.Eventually(t, 30*time.Second, "the edge's admin listener answering GET /healthz", func() bool {
		res, err := client.Get(e.admin + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-e.proc.Exited():
			t.Fatalf("the edge exited at start:\n%s", e.proc.Tail(40))
		default:
		}
		return false
	})
	return e
}

// do sends a request to the edge (a path under /admin/ or /metrics to its admin listener) with token as the
// bearer and user, when set, in X-User-Token, and returns the status and body.
func (e *edge) do(t *testing.T, method, path, token, user, body string) (int, []byte) {
	t.Helper()
	base := e.public
	if strings.HasPrefix(path, "/admin/") || path == "/metrics" {
		base = e.admin
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if user != "" {
		req.Header.Set("X-User-Token", user)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return res.StatusCode, b
}

// mustDo is do that fails t unless the edge answers want, and decodes a JSON answer into out (when not nil).
func (e *edge) mustDo(t *testing.T, method, path, token, user, body string, want int, out any) {
	t.Helper()
	status, b := e.do(t, method, path, token, user, body)
	if status != want {
		t.Fatalf("edge %s %s = %d %s, want %d", method, path, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("edge %s %s: answer %q: %v", method, path, b, err)
		}
	}
}

// waitSale waits until the edge serves sale's snapshot.
func (e *edge) waitSale(t *testing.T, sale string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "the edge serving sale "+sale, func() bool {
		status, _ := e.do(t, http.MethodGet, "/v1/sales/"+sale, "", "", "")
		return status == http.StatusOK
	})
}

// queueAnswer is the body of a join or a status poll.
type queueAnswer struct {
	State          string `json:"state"`
	QueueToken     string `json:"queue_token"`
	PollAfterMS    int64  `json:"poll_after_ms"`
	AdmissionToken string `json:"admission_token"`
}

// admitted joins sale as the holder of user token and polls until admitted, returning the admission token.
// Polls keep to the answer's pace (the edge limits polls per account).
func (e *edge) admitted(t *testing.T, sale, user string) string {
	t.Helper()
	var a queueAnswer
	e.mustDo(t, http.MethodPost, "/v1/sales/"+sale+"/queue", user, "", "", http.StatusAccepted, &a)
	queueToken := a.QueueToken
	pace := func() time.Duration { return time.Duration(min(max(a.PollAfterMS, 100), 1000)) * time.Millisecond }
	next := time.Now().Add(pace())
	testenv.Eventually(t, 20*time.Second, "admitted in the line of "+sale, func() bool {
		if a.State != "admitted" && !time.Now().Before(next) {
			e.mustDo(t, http.MethodGet, "/v1/sales/"+sale+"/queue/status", queueToken, user, "", http.StatusOK, &a)
			next = time.Now().Add(pace())
		}
		return a.State == "admitted"
	})
	return a.AdmissionToken
}

// tarpitted joins sale as the holder of user token with forged proofs of work until the edge has put the
// account in the tarpit (the sale's challenge setting reaches the edge within a snapshot or two; then each
// forged solution is an offence).
func (e *edge) tarpitted(t *testing.T, sale, user string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "the tarpit holding an account after forged proofs of work at "+sale, func() bool {
		req, err := http.NewRequest(http.MethodPost, e.public+"/v1/sales/"+sale+"/queue", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+user)
		req.Header.Set("X-Challenge", "forged")
		req.Header.Set("X-Challenge-Solution", "0")
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("join %s: %v", sale, err)
		}
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("join %s: read the answer: %v", sale, err)
		}
		var tarpit struct {
			Entries []json.RawMessage `json:"entries"`
		}
		e.mustDo(t, http.MethodGet, "/admin/tarpit", edgeAdminToken, "", "", http.StatusOK, &tarpit)
		return len(tarpit.Entries) > 0
	})
}

// scrape reads the edge's GET /metrics.
func (e *edge) scrape(t *testing.T) scrape {
	t.Helper()
	status, body := e.do(t, http.MethodGet, "/metrics", edgeAdminToken, "", "")
	if status != http.StatusOK {
		t.Fatalf("edge GET /metrics = %d %s", status, body)
	}
	s, err := parseScrape("edge", body)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
