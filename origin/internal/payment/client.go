package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// APIError is a refusal from the gateway: a 4xx with its error code.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("payment gateway: %d %s: %s", e.Status, e.Code, e.Message)
}

// ClientOptions tune a Client; zero values take the defaults.
type ClientOptions struct {
	// Timeout bounds one HTTP attempt; 0 means 5 s.
	Timeout time.Duration
	// Attempts is how many times a call is tried when the gateway is down
	// or answers 5xx or 429; 0 means 3. Every call that changes something
	// carries an idempotency key, so a retry never pays or refunds twice.
	Attempts int
	// Backoff is the pause before the second attempt, doubling after; 0
	// means 200 ms.
	Backoff time.Duration
	// MaxConns caps the connections to the gateway, all of which are kept
	// open between calls; 0 means 64. (net/http's default keeps only 2 idle
	// per host: in a burst of orders every other call would dial afresh and
	// leave a socket in TIME_WAIT.)
	MaxConns int
	// WebhookSecrets verify the gateway's webhook signatures; any one may
	// match (rotation). Without one every delivery is refused.
	WebhookSecrets [][]byte
	// Tolerance is how old (or how far ahead) a webhook's signed time may
	// be; 0 means DefaultTolerance.
	Tolerance time.Duration
	// Registerer, when set, takes flashgate_origin_gateway_seconds{call,
	// outcome}: each call's time, its retries and their pauses included,
	// as the caller waited for it. nil: calls are not timed.
	Registerer prometheus.Registerer
}

// Client talks to the gateway's API. It is safe for concurrent use.
type Client struct {
	base   string
	apiKey string
	http   *http.Client
	opts   ClientOptions
	times  *CallTimes
}

// NewClient returns a client of the gateway at baseURL (for example
// http://127.0.0.1:9300) with the merchant's API key.
func NewClient(baseURL, apiKey string, opts ClientOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 200 * time.Millisecond
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultTolerance
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxConnsPerHost = opts.MaxConns
	transport.MaxIdleConnsPerHost = opts.MaxConns
	transport.MaxIdleConns = opts.MaxConns
	return &Client{
		base:   strings.TrimRight(baseURL, "/"),
		apiKey: apiKey,
		http:   &http.Client{Timeout: opts.Timeout, Transport: transport},
		opts:   opts,
		times:  NewCallTimes(opts.Registerer, callNames[:]...),
	}
}

// call names a gateway call in flashgate_origin_gateway_seconds.
type call int

const (
	callCreateIntent call = iota
	callRefund
	callListIntents
	callGetIntent
	callCount
)

var callNames = [callCount]string{"create_intent", "refund", "list_intents", "get_intent"}

// observe records a call that started at start and ended in err.
func (c *Client) observe(which call, start time.Time, err error) {
	c.times.Observe(callNames[which], start, err)
}

// CreateIntent asks the gateway to collect a payment. The same
// idempotencyKey always gets the same intent back.
func (c *Client) CreateIntent(ctx context.Context, req NewIntent, idempotencyKey string) (Intent, error) {
	start := time.Now()
	var in Intent
	err := c.call(ctx, http.MethodPost, "/v1/intents", idempotencyKey, req, &in)
	c.observe(callCreateIntent, start, err)
	return in, err
}

// Refund gives amountMinor of a succeeded intent back (0 means all that is
// left). The same idempotencyKey always gets the same refund back.
func (c *Client) Refund(ctx context.Context, intentID string, amountMinor int64, idempotencyKey string) (Refund, error) {
	body := map[string]int64{}
	if amountMinor > 0 {
		body["amount_minor"] = amountMinor
	}
	start := time.Now()
	var r Refund
	err := c.call(ctx, http.MethodPost, "/v1/intents/"+url.PathEscape(intentID)+"/refunds", idempotencyKey, body, &r)
	c.observe(callRefund, start, err)
	return r, err
}

// Intents lists the intents created since the given time (zero: all), with
// their status and refunds, for reconciliation.
func (c *Client) Intents(ctx context.Context, since time.Time) ([]Intent, error) {
	start := time.Now()
	path := "/v1/intents"
	if !since.IsZero() {
		path += "?created_since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	}
	var out struct {
		Intents []Intent `json:"intents"`
	}
	err := c.call(ctx, http.MethodGet, path, "", nil, &out)
	c.observe(callListIntents, start, err)
	return out.Intents, err
}

// Intent reads one intent, with its status and refunds.
func (c *Client) Intent(ctx context.Context, id string) (Intent, error) {
	start := time.Now()
	var in Intent
	err := c.call(ctx, http.MethodGet, "/v1/intents/"+url.PathEscape(id), "", nil, &in)
	c.observe(callGetIntent, start, err)
	return in, err
}

// call makes one API call, retrying passing failures with backoff.
func (c *Client) call(ctx context.Context, method, path, idempotencyKey string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("payment gateway %s %s: %w", method, path, err)
		}
	}
	err := Retry(ctx, nil, c.opts.Attempts, c.opts.Backoff, func() (bool, error) {
		return c.try(ctx, method, path, idempotencyKey, body, out)
	})
	if err != nil {
		return fmt.Errorf("payment gateway %s %s: %w", method, path, err)
	}
	return nil
}

// try makes one attempt and says whether a failure is worth another.
func (c *Client) try(ctx context.Context, method, path, idempotencyKey string, body []byte, out any) (retry bool, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	// A listing of many intents is large; past this the call fails loudly
	// (the reconciler then alerts) rather than reading without end.
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return true, err
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return true, fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		var eb struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &eb) == nil {
			e.Code, e.Message = eb.Error, eb.Message
		}
		return false, e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("decode answer: %w", err)
	}
	return false, nil
}

// IsRefusal reports whether err is the gateway saying no (a 4xx), as
// opposed to the gateway being unreachable or failing.
func IsRefusal(err error) bool {
	var e *APIError
	return errors.As(err, &e)
}
