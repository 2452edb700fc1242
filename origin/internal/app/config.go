package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/secretcheck"
	"github.com/flashgate/flashgate/internal/usertokens"
	"github.com/flashgate/flashgate/origin/internal/checkout"
	"github.com/flashgate/flashgate/origin/internal/orders"
	"github.com/flashgate/flashgate/origin/internal/workers"
	"github.com/flashgate/flashgate/tokens"
)

// Config is everything the origin can be told, from flags or, for each flag,
// its environment variable (the flag wins). Units are in the field names.
type Config struct {
	Addr        string // public listener, reached only through the edge
	AdminAddr   string // admin listener: sales, ledger, metrics, dev tokens; loopback by default
	RedisURL    string
	PostgresURL string
	RedisPrefix string // prefix of every Redis key; tests use their own

	// RedisSentinels are the comma-separated host:port addresses of Redis
	// Sentinels; "" means RedisURL names the one server. With them the
	// origin asks the Sentinels for the primary and follows a failover
	// without restart, and of RedisURL only the username, password, db and
	// options count.
	RedisSentinels        string
	RedisMasterName       string // the primary's name at the Sentinels
	RedisSentinelPassword string // the Sentinels' own password; "" = none
	// RedisCluster are comma-separated host:port addresses of Redis
	// Cluster nodes ("" = no cluster); with them the origin finds each sale's
	// keys on the node holding their slot, and of RedisURL only the
	// username, password and options count.
	RedisCluster string

	PostgresMaxConns int // connections in the Postgres pool

	// AdminToken is the admin listener's bearer token: required, and
	// strong (internal/secretcheck: 32 random bytes' worth).
	AdminToken string
	// Dev is dev mode: the dev admission-token endpoint on the admin
	// listener, and user tokens checked with DevUserTokenSecret (the
	// edges' dev logins sign with it) instead of the shop's key, whose
	// settings dev mode refuses.
	Dev                bool
	DevUserTokenSecret string // HS256 secret of dev mode's user tokens; the edges' too

	TokenKeys              string // admission-token keys "kid:base64,..."; first signs
	UserTokenSecret        string // HS256 secret of the shop's user tokens, or
	UserTokenPublicKeyFile string // a PEM Ed25519/RSA public key file instead
	// UserTokenIssuer and UserTokenAudience are the iss and aud user
	// tokens must carry; "" = not checked, so that any token the shop
	// signs with its key passes, whatever it was issued for (start-up
	// warns of it outside dev mode). Neither may be our own tokens'.
	UserTokenIssuer   string
	UserTokenAudience string
	// LineAudience is the origin's own name, which the edges' signed line
	// requests must be signed for (the edges' FLASHGATE_LINE_AUDIENCE),
	// whatever Host they carry. "" means Addr when it names a host, say
	// 127.0.0.1:9090, which is what an edge whose origin URL is
	// http://127.0.0.1:9090 signs for by default; with Addr on every
	// interface (":9090", "0.0.0.0:9090") it is required. Set it, to the
	// same value on edges and origins (say production), wherever edges
	// reach the origin under another name or environments share token
	// keys. See LineAudienceName.
	LineAudience string

	Instance         string        // this origin's name as a stream consumer; stable across restarts
	WriterBatch      int           // intents per Postgres transaction
	WriterClaimIdle  time.Duration // when a silent consumer's intents are taken over
	WriterPoll       time.Duration // how long a read of the intents waits, and how often new sales are looked for
	SweepInterval    time.Duration // how often expired holds are looked for
	RequestBudget    time.Duration // Redis+Postgres time one request may use
	ShutdownTimeout  time.Duration // how long a shutdown may drain
	RedisRetention   time.Duration // how long per-shopper Redis keys outlive their last write
	ReservePipelines int           // reserve pipelines in flight at once
	ReserveMaxBatch  int           // reserves per pipeline
	// ReserveJournal journals every granted reserve in Postgres before it
	// is answered (default on): a Redis that loses its data then loses no
	// hold it promised. Off, a hold is promised as soon as Redis has it.
	ReserveJournal bool
	// ReserveWaitReplicas makes each reserve pipeline WAIT for that many
	// Redis replicas, up to ReserveWaitTimeout, before answering; 0 = none.
	ReserveWaitReplicas int
	ReserveWaitTimeout  time.Duration
	// RedisCheckInterval is how often the origin checks that Redis still
	// holds each current sale's state, and rebuilds a sale it lost.
	RedisCheckInterval time.Duration
	// MaxHoldsPerAccount caps the holds one account may take in a sale,
	// counting those that ran out or were cancelled, so that no account
	// keeps a unit by holding it again and again; 0 = no cap.
	MaxHoldsPerAccount int

	// ReadTimeout bounds reading one request, head and body, from its
	// first byte (on a new connection, from the connect): a request still
	// arriving then is answered 408, and a new connection that carried
	// nothing is closed without an answer.
	ReadTimeout time.Duration
	// MaxRequestHeadBytes bounds a request's line and headers; a larger
	// head is answered 431. The edge passes shoppers' heads on with a few
	// headers added, so keep it above the edge's own limit.
	MaxRequestHeadBytes int

	// Payments: orders and the webhook are on when the chosen provider's
	// API key is set (PaymentsOn). PaymentProvider is "sandbox" (the
	// sandbox gateway's own API; the default), "stripe" or "razorpay".
	PaymentProvider string
	GatewayURL      string // the sandbox gateway: base URL of its API
	GatewayAPIKey   string // the merchant's API key there
	WebhookSecrets  string // its webhook signature secrets, comma-separated (rotation)
	// Stripe: the secret API key (sk_test_... or sk_live_...), the webhook
	// endpoint's signing secrets (whsec_..., comma-separated: rotation),
	// and its API's base URL ("" means Stripe's own; a stand-in's, such as
	// stripe-mock or the sandbox gateway playing Stripe, otherwise).
	StripeSecretKey      string
	StripeWebhookSecrets string
	StripeAPIURL         string
	// Razorpay: the key id and secret (rzp_test_... / rzp_live_...), the
	// webhook secret(s) set in its dashboard (comma-separated: rotation),
	// and its API's base URL ("" means Razorpay's own).
	RazorpayKeyID          string
	RazorpayKeySecret      string
	RazorpayWebhookSecrets string
	RazorpayAPIURL         string
	PaymentGrace           time.Duration // extra hold time once a payment starts, given once; 0 = none
	PaymentReturnURL       string        // where the gateway's page sends the shopper back; "" = nowhere
	ReconcileInterval      time.Duration // how often gateway records are compared with orders; 0 = never here (another origin does)
	AutotunePeriod         time.Duration // how often the admission controller may change an autotuned sale's rate; 0 = 5 s
	// OrderIntentWait is how long POST /v1/orders waits for the gateway's
	// payment intent before answering without it (the page reads the
	// order until its payment link is there).
	OrderIntentWait time.Duration
}

// goodSecrets: at least one secret, none empty or short.
func goodSecrets(list string) bool {
	parts := strings.Split(list, ",")
	for _, p := range parts {
		if len(strings.TrimSpace(p)) < 16 {
			return false
		}
	}
	return len(parts) > 0
}

// LineAudienceName is the audience the origin takes line requests for:
// LineAudience, or else Addr (Validate refuses an Addr on every interface
// without LineAudience).
func (c Config) LineAudienceName() string {
	if c.LineAudience != "" {
		return c.LineAudience
	}
	return c.Addr
}

// namesHost reports whether addr, a listen address, names one host: not
// every interface (an empty or unspecified host), and host:port.
func namesHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsUnspecified()
}

// Payment providers (Config.PaymentProvider).
const (
	ProviderSandbox  = "sandbox"
	ProviderStripe   = "stripe"
	ProviderRazorpay = "razorpay"
)

// PaymentsOn reports whether the chosen payment provider is configured:
// its API key is set.
func (c Config) PaymentsOn() bool {
	switch c.PaymentProvider {
	case ProviderStripe:
		return c.StripeSecretKey != ""
	case ProviderRazorpay:
		return c.RazorpayKeyID != "" || c.RazorpayKeySecret != ""
	default:
		return c.GatewayAPIKey != ""
	}
}

// validatePayments reports what is wrong with the chosen provider's
// settings, when payments are on.
func (c Config) validatePayments() error {
	switch c.PaymentProvider {
	case ProviderSandbox:
		switch {
		case !c.PaymentsOn():
		case c.GatewayURL == "":
			return errors.New("config: with a gateway API key, FLASHGATE_GATEWAY_URL is required")
		case !goodSecrets(c.WebhookSecrets):
			return errors.New("config: with a gateway API key, FLASHGATE_GATEWAY_WEBHOOK_SECRET must name one or more secrets of at least 16 characters, comma-separated")
		}
	case ProviderStripe:
		switch {
		case !c.PaymentsOn():
		case !goodSecrets(c.StripeWebhookSecrets):
			return errors.New("config: with Stripe, FLASHGATE_STRIPE_WEBHOOK_SECRET must name the webhook endpoint's signing secret (whsec_...), or several, comma-separated")
		}
	case ProviderRazorpay:
		switch {
		case !c.PaymentsOn():
		case c.RazorpayKeyID == "" || c.RazorpayKeySecret == "":
			return errors.New("config: with Razorpay, set both FLASHGATE_RAZORPAY_KEY_ID and FLASHGATE_RAZORPAY_KEY_SECRET")
		case !goodSecrets(c.RazorpayWebhookSecrets):
			return errors.New("config: with Razorpay, FLASHGATE_RAZORPAY_WEBHOOK_SECRET must name the webhook secret set in its dashboard (at least 16 characters), or several, comma-separated")
		}
	default:
		return fmt.Errorf("config: FLASHGATE_PAYMENT_PROVIDER %q: want sandbox, stripe or razorpay", c.PaymentProvider)
	}
	return nil
}

// DefaultConfig returns the defaults every flag starts from.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Addr:               ":9090",
		AdminAddr:          "127.0.0.1:9091",
		RedisURL:           "redis://127.0.0.1:6379/0",
		RedisMasterName:    "flashgate",
		PostgresURL:        "postgres://postgres@127.0.0.1:5432/flashgate?sslmode=disable",
		RedisPrefix:        "fg:",
		PostgresMaxConns:   32,
		Instance:           "origin-" + host,
		WriterBatch:        500,
		WriterClaimIdle:    10 * time.Second,
		WriterPoll:         time.Second,
		SweepInterval:      workers.DefaultSweepInterval,
		RequestBudget:      3 * time.Second,
		ShutdownTimeout:    15 * time.Second,
		RedisRetention:     7 * 24 * time.Hour,
		ReservePipelines:   checkout.DefaultPipelines,
		ReserveMaxBatch:    checkout.DefaultMaxBatch,
		ReserveJournal:     true,
		ReserveWaitTimeout: checkout.DefaultWaitTimeout,
		RedisCheckInterval: time.Second,
		MaxHoldsPerAccount: 2,

		ReadTimeout:         5 * time.Second,
		MaxRequestHeadBytes: 32 << 10, // the edge's 16 KiB, twice: room for what the edge adds

		PaymentProvider:   ProviderSandbox,
		GatewayURL:        "http://127.0.0.1:9300",
		PaymentGrace:      2 * time.Minute,
		ReconcileInterval: 30 * time.Second,
		OrderIntentWait:   orders.DefaultIntentWait,
	}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.AdminToken == "":
		return errors.New("config: FLASHGATE_ORIGIN_ADMIN_TOKEN (-admin-token) is required; " + secretcheck.HowToMake)
	case c.TokenKeys == "":
		return errors.New("config: FLASHGATE_TOKEN_KEYS (-token-keys) is required")
	case !c.Dev && (c.UserTokenSecret == "") == (c.UserTokenPublicKeyFile == ""):
		return errors.New("config: set exactly one of FLASHGATE_USER_TOKEN_SECRET and FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE")
	case c.Dev && (c.UserTokenSecret != "" || c.UserTokenPublicKeyFile != ""):
		return errors.New("config: dev mode checks user tokens with FLASHGATE_DEV_USER_TOKEN_SECRET only: unset the shop's FLASHGATE_USER_TOKEN_SECRET and FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE (or switch dev mode off)")
	case c.Dev && len(c.DevUserTokenSecret) < tokens.MinSecretLen:
		return fmt.Errorf("config: dev mode needs FLASHGATE_DEV_USER_TOKEN_SECRET of at least %d bytes, the same as the edges'; %s", tokens.MinSecretLen, secretcheck.HowToMake)
	case c.LineAudience == "" && !namesHost(c.Addr):
		return fmt.Errorf("config: FLASHGATE_LINE_AUDIENCE (-line-audience) is required: the public listener %q names no host "+
			"to take the edges' line requests for; set it to the same name on the edges and origins of this environment (say production)", c.Addr)
	case c.RedisSentinels != "" && c.RedisMasterName == "":
		return errors.New("config: FLASHGATE_REDIS_MASTER (-redis-master) is required with FLASHGATE_REDIS_SENTINELS")
	case c.Instance == "":
		return errors.New("config: the instance name must not be empty")
	case c.ReserveWaitReplicas < 0 || (c.ReserveWaitReplicas > 0 && c.ReserveWaitTimeout <= 0):
		return errors.New("config: reserve wait replicas must not be negative, and with replicas the wait timeout must be positive")
	case c.MaxHoldsPerAccount < 0:
		return errors.New("config: the holds per account (FLASHGATE_MAX_HOLDS_PER_ACCOUNT) must not be negative; 0 means no cap")
	case c.WriterBatch < 1 || c.ReservePipelines < 1 || c.ReserveMaxBatch < 1 || c.PostgresMaxConns < 1:
		return errors.New("config: writer batch, reserve pipelines, reserve batch and Postgres connections must be positive")
	case c.AutotunePeriod < 0:
		return errors.New("config: FLASHGATE_AUTOTUNE_PERIOD must not be negative")
	case c.PaymentsOn() && (c.PaymentGrace < 0 || c.ReconcileInterval < 0):
		return errors.New("config: the payment grace and the reconcile interval must not be negative")
	case c.PaymentsOn() && c.OrderIntentWait <= 0:
		return errors.New("config: FLASHGATE_ORDER_INTENT_WAIT must be positive")
	case c.WriterClaimIdle <= 0 || c.WriterPoll <= 0 || c.SweepInterval <= 0 || c.RequestBudget <= 0 || c.ShutdownTimeout <= 0 || c.RedisRetention <= 0 || c.RedisCheckInterval <= 0 || c.ReadTimeout <= 0:
		return fmt.Errorf("config: durations must be positive")
	case c.WriterPoll > c.WriterClaimIdle/4:
		// A read that waits longer would let the writer's lease run out
		// while it waits: another writer would take the stream over.
		return errors.New("config: FLASHGATE_WRITER_POLL must be at most a quarter of FLASHGATE_WRITER_CLAIM_IDLE")
	case c.MaxRequestHeadBytes < minRequestHeadBytes:
		return fmt.Errorf("config: the request head limit must be at least %d bytes", minRequestHeadBytes)
	}
	if err := c.validatePayments(); err != nil {
		return err
	}
	if err := secretcheck.Strong(c.AdminToken); err != nil {
		return fmt.Errorf("config: the admin token (FLASHGATE_ORIGIN_ADMIN_TOKEN, -admin-token) is too weak: %w; %s", err, secretcheck.HowToMake)
	}
	if err := c.userTokens().Check(); err != nil {
		return err
	}
	_, err := c.redis()
	return err
}

// minRequestHeadBytes is fasthttp's own default read buffer: below it an
// ordinary request would not fit.
const minRequestHeadBytes = 4 << 10

// redisPoolSize is the origin's Redis pool unless the URL sets pool_size.
const redisPoolSize = 64

// redis says how to reach Redis, checked.
func (c Config) redis() (redisconn.Options, error) {
	return redisconn.FromSettings(redisconn.Settings{URL: c.RedisURL, Sentinels: c.RedisSentinels,
		MasterName: c.RedisMasterName, SentinelPassword: c.RedisSentinelPassword, Cluster: c.RedisCluster}, redisPoolSize)
}

// userTokens are c's user-token settings, as package usertokens checks them.
func (c Config) userTokens() usertokens.Settings {
	return usertokens.Settings{TokenKeys: c.TokenKeys, UserTokenSecret: c.UserTokenSecret, DevUserTokenSecret: c.DevUserTokenSecret,
		UserTokenIssuer: c.UserTokenIssuer, UserTokenAudience: c.UserTokenAudience, Dev: c.Dev}
}

// Warnings are what start-up logs at WARN about c: outside dev mode, user
// tokens whose iss or aud is not checked.
func (c Config) Warnings() []string { return c.userTokens().Warnings() }
