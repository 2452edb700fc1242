package sandboxgateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
)

// Config configures a Gateway. The zero value of each optional field is
// written next to it; New fills those defaults in.
type Config struct {
	// Personality is the provider the gateway plays: its merchant API
	// and its webhooks (see Personalities). "": PersonalityFlashgate.
	Personality string
	// APIKey is the bearer token every /v1/* call must carry. Required.
	APIKey string
	// ControlToken is the bearer token every /sandbox/* call must carry;
	// pay and fail also take the intent's own pay key (see PayURL). At
	// least MinControlTokenLen bytes, and not the APIKey: the merchant
	// must not be able to pay its own intents. Required.
	ControlToken string
	// WebhookURL receives every event as a signed POST. Empty: events are
	// recorded but never sent, until SetWebhookURL.
	WebhookURL string
	// WebhookSecrets sign each webhook, one v1= entry per secret, so that a
	// receiver can rotate its secret. At least one, none empty. Required.
	WebhookSecrets []string
	// PublicURL is where shoppers reach this gateway, without a trailing
	// slash; pay_url is PublicURL + "/pay/" + intent id + "#key=" + the
	// intent's pay key. Empty: pay_url starts with the path. See
	// SetPublicURL.
	PublicURL string

	// Latency is slept before answering each /v1/* call. Zero: none.
	Latency time.Duration
	// FailureRate is the probability, 0 to 1, that a /v1/* call is answered
	// 503 unavailable before anything is done. Zero: never.
	FailureRate float64
	// DuplicateRate is the probability, 0 to 1, that an event delivered
	// successfully is delivered once more, same id and body, freshly signed.
	// Zero: never.
	DuplicateRate float64

	// MaxAttempts bounds the deliveries of one event, the first included.
	// Zero: 8.
	MaxAttempts int
	// RetryBase is the wait after the first failed delivery; it doubles per
	// attempt, with ±20% jitter. Zero: 500ms.
	RetryBase time.Duration
	// RetryMax caps the wait between deliveries. Zero: 30s.
	RetryMax time.Duration
	// DeliveryTimeout bounds one delivery attempt. Zero: 10s.
	DeliveryTimeout time.Duration

	// Seed seeds the failure, duplicate and jitter randomness, so tests are
	// repeatable. Zero: a random seed. Ids are always random.
	Seed int64
	// Log receives state changes and webhook deliveries. Nil: discarded.
	Log *slog.Logger
	// WebhookDial, when set, opens the webhook connections instead of the
	// network; tests use it to reach a receiver on an in-memory listener.
	WebhookDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Clock gives every timestamp, webhook signatures' t included, and the
	// waits between webhook retries (Latency is real time). Nil: clock.Real.
	Clock clock.Clock
}

// MinControlTokenLen is the shortest ControlToken New accepts, in bytes.
const MinControlTokenLen = 16

// Defaults of the optional Config fields.
const (
	DefaultMaxAttempts     = 8
	DefaultRetryBase       = 500 * time.Millisecond
	DefaultRetryMax        = 30 * time.Second
	DefaultDeliveryTimeout = 10 * time.Second
)

// Validate reports the first thing wrong with c. Zero optional fields are
// valid; they mean their default.
func (c Config) Validate() error {
	switch {
	case personalities[c.personality()] == nil:
		return fmt.Errorf("gateway: Personality %q: want one of %s", c.Personality, strings.Join(Personalities(), ", "))
	case c.APIKey == "":
		return errors.New("gateway: APIKey is required")
	case c.ControlToken == "":
		return errors.New("gateway: ControlToken is required")
	case len(c.ControlToken) < MinControlTokenLen:
		return fmt.Errorf("gateway: ControlToken must be at least %d bytes", MinControlTokenLen)
	case c.ControlToken == c.APIKey:
		return errors.New("gateway: ControlToken must differ from APIKey")
	case len(c.WebhookSecrets) == 0:
		return errors.New("gateway: at least one webhook secret is required")
	case c.Latency < 0:
		return errors.New("gateway: Latency must not be negative")
	case !(c.FailureRate >= 0 && c.FailureRate <= 1):
		return errors.New("gateway: FailureRate must be between 0 and 1")
	case !(c.DuplicateRate >= 0 && c.DuplicateRate <= 1):
		return errors.New("gateway: DuplicateRate must be between 0 and 1")
	case c.MaxAttempts < 0:
		return errors.New("gateway: MaxAttempts must not be negative")
	case c.RetryBase < 0 || c.RetryMax < 0 || c.DeliveryTimeout < 0:
		return errors.New("gateway: RetryBase, RetryMax and DeliveryTimeout must not be negative")
	}
	for i, s := range c.WebhookSecrets {
		if s == "" {
			return fmt.Errorf("gateway: webhook secret %d is empty", i+1)
		}
	}
	if err := checkBaseURL(c.WebhookURL); err != nil {
		return fmt.Errorf("gateway: WebhookURL: %w", err)
	}
	if err := checkBaseURL(c.PublicURL); err != nil {
		return fmt.Errorf("gateway: PublicURL: %w", err)
	}
	return nil
}

// personality is c.Personality or its default.
func (c Config) personality() string {
	if c.Personality == "" {
		return PersonalityFlashgate
	}
	return c.Personality
}

// checkBaseURL accepts "" or an absolute http(s) URL.
func checkBaseURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", s)
	}
	return nil
}

// withDefaults returns c with every zero optional field set.
func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryBase == 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.Or(c.Clock)
	c.Personality = c.personality()
	c.WebhookSecrets = append([]string(nil), c.WebhookSecrets...)
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return c
}

// Gateway is the sandbox gateway: its HTTP API, its in-memory state and its
// webhook deliveries. Create it with New, serve it as an http.Handler and
// stop its deliveries with Close.
type Gateway struct {
	cfg     Config // with defaults; never changed after New
	persona personality
	log     *slog.Logger
	rnd     *lockedRand
	client  *http.Client
	mux     *http.ServeMux

	// ctx ends when Close starts: retries stop and in-flight deliveries
	// are cancelled. wg counts delivery goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards every field below, the intents with their refunds, the
	// idempotency records, and the events with their delivery records.
	mu            sync.Mutex
	intents       map[string]*Intent // by id
	payKeys       map[string]string  // intent id → the key its pay_url carries
	refundIntents map[string]string  // refund id → its intent's id
	order         []*Intent          // in creation order
	createKeys    map[string]createRecord
	refundKeys    map[string]refundRecord
	events        []*eventRecord // in the order they were recorded
	publicURL     string
	webhookURL    string
	webhooksOn    bool
	holdRefunds   bool // see HoldRefunds
	closed        bool // set by Close: new events are not sent
}

// New returns a Gateway for cfg, which must be valid.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.WebhookDial != nil {
		transport.DialContext = cfg.WebhookDial
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{
		cfg: cfg,
		log: cfg.Log,
		rnd: newLockedRand(cfg.Seed),
		client: &http.Client{
			Transport: transport,
			// A redirect is a non-2xx answer, retried like any other.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ctx:           ctx,
		cancel:        cancel,
		intents:       make(map[string]*Intent),
		payKeys:       make(map[string]string),
		refundIntents: make(map[string]string),
		createKeys:    make(map[string]createRecord),
		refundKeys:    make(map[string]refundRecord),
		publicURL:     cfg.PublicURL,
		webhookURL:    cfg.WebhookURL,
		webhooksOn:    true,
	}
	g.persona = personalities[cfg.Personality](g)
	g.mux = g.routes()
	return g, nil
}

// Close stops webhook retries, cancels deliveries in flight and waits, until
// ctx ends, for every delivery goroutine to return. The API keeps answering;
// events recorded after Close are never sent.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()

	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		g.client.CloseIdleConnections()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gateway: wait for webhook deliveries: %w", ctx.Err())
	}
}

// SetPublicURL sets the base of pay_url for intents created from now on,
// e.g. to an httptest server's URL once it listens.
func (g *Gateway) SetPublicURL(u string) error {
	if err := checkBaseURL(u); err != nil {
		return fmt.Errorf("gateway: public URL: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.publicURL = strings.TrimRight(u, "/")
	return nil
}

// SetWebhookURL sets where events recorded from now on are sent; "" stops
// sending them.
func (g *Gateway) SetWebhookURL(u string) error {
	if err := checkBaseURL(u); err != nil {
		return fmt.Errorf("gateway: webhook URL: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.webhookURL = u
	return nil
}

// SetWebhooksEnabled switches webhook delivery on or off. While off, events
// are recorded but not sent and pending retries stop, as if the webhooks
// were lost; switching back on does not resend them.
func (g *Gateway) SetWebhooksEnabled(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.webhooksOn = on
}

// WebhooksEnabled reports whether webhook delivery is on (the default).
func (g *Gateway) WebhooksEnabled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.webhooksOn
}

// now is the configured clock, in UTC.
func (g *Gateway) now() time.Time { return g.cfg.Clock.Now().UTC() }

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string { return prefix + randomHex(12) }

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// lockedRand is a seedable random source safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex // guards r
	r  *mrand.Rand
}

func newLockedRand(seed int64) *lockedRand {
	s := uint64(seed)
	if seed == 0 {
		s = mrand.Uint64()
	}
	return &lockedRand{r: mrand.New(mrand.NewPCG(s, s^0x9e3779b97f4a7c15))}
}

// chance reports true with probability p.
func (l *lockedRand) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	return l.float64() < p
}

// float64 returns a number in [0, 1).
func (l *lockedRand) float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}
