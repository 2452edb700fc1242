package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/envflag"
	"github.com/flashgate/flashgate/internal/sandboxgateway"
)

// config is the binary's configuration: where it listens, how long it may
// take to stop, and the gateway's own settings.
type config struct {
	// Addr is the listen address.
	Addr string
	// ShutdownTimeout bounds draining requests and stopping webhook
	// deliveries on SIGINT or SIGTERM.
	ShutdownTimeout time.Duration
	// Gateway configures the gateway; Log is set by run.
	Gateway sandboxgateway.Config
}

// defaultConfig is the configuration before flags and environment: the
// local stack's ports, on loopback only (the sandbox is for this machine's
// development and tests), and a gateway that duplicates one delivery in
// ten.
func defaultConfig() config {
	return config{
		Addr:            "127.0.0.1:9300",
		ShutdownTimeout: 10 * time.Second,
		Gateway: sandboxgateway.Config{
			Personality:     sandboxgateway.PersonalityFlashgate,
			PublicURL:       "http://127.0.0.1:9300",
			WebhookURL:      "http://127.0.0.1:8080/v1/payments/webhook",
			DuplicateRate:   0.1,
			MaxAttempts:     sandboxgateway.DefaultMaxAttempts,
			RetryBase:       sandboxgateway.DefaultRetryBase,
			RetryMax:        sandboxgateway.DefaultRetryMax,
			DeliveryTimeout: sandboxgateway.DefaultDeliveryTimeout,
		},
	}
}

// Validate reports the first thing wrong with c, naming the flag to fix.
func (c config) Validate() error {
	switch {
	case c.Addr == "":
		return errors.New("-addr is required")
	case c.ShutdownTimeout <= 0:
		return errors.New("-shutdown-timeout must be positive")
	case !slices.Contains(sandboxgateway.Personalities(), c.Gateway.Personality):
		return fmt.Errorf("-personality ($FLASHGATE_GATEWAY_PERSONALITY) %q: want one of %s",
			c.Gateway.Personality, strings.Join(sandboxgateway.Personalities(), ", "))
	case c.Gateway.APIKey == "":
		return errors.New("-api-key ($FLASHGATE_GATEWAY_API_KEY) is required")
	case c.Gateway.ControlToken == "":
		return errors.New("-control-token ($FLASHGATE_GATEWAY_CONTROL_TOKEN) is required")
	case len(c.Gateway.ControlToken) < sandboxgateway.MinControlTokenLen:
		return fmt.Errorf("-control-token ($FLASHGATE_GATEWAY_CONTROL_TOKEN) must be at least %d bytes", sandboxgateway.MinControlTokenLen)
	case c.Gateway.ControlToken == c.Gateway.APIKey:
		return errors.New("-control-token ($FLASHGATE_GATEWAY_CONTROL_TOKEN) must differ from -api-key: the merchant must not pay its own intents")
	case len(c.Gateway.WebhookSecrets) == 0:
		return errors.New("-webhook-secret ($FLASHGATE_GATEWAY_WEBHOOK_SECRET) is required")
	}
	return c.Gateway.Validate()
}

// loadConfig reads the configuration: defaults, then environment variables
// (a secret's also from the file $NAME_FILE names), then flags in args,
// which win. No secret is printed, by -h or by any error.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	var secrets string
	fs := flag.NewFlagSet("sandboxgateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: sandboxgateway [flags]\n\n"+
			"A sandbox payment gateway for development and tests, speaking its own\n"+
			"protocol or a real provider's (-personality). Each flag may also be set by\n"+
			"the environment variable named after it; the flag wins.\n\n")
		fs.PrintDefaults()
	}
	env := envflag.New(fs)
	env.String(&c.Addr, "addr", "FLASHGATE_GATEWAY_ADDR", "listen address")
	env.String(&c.Gateway.Personality, "personality", "FLASHGATE_GATEWAY_PERSONALITY",
		"the provider the gateway plays, its API and webhooks: "+strings.Join(sandboxgateway.Personalities(), ", "))
	env.String(&c.Gateway.PublicURL, "public-url", "FLASHGATE_GATEWAY_PUBLIC_URL", "base URL shoppers reach the pay page at; pay_url is <public-url>/pay/<intent_id>#key=<pay key>")
	env.String(&c.Gateway.WebhookURL, "webhook-url", "FLASHGATE_GATEWAY_WEBHOOK_URL", "where events are POSTed; empty: recorded, never sent")
	env.Secret(&secrets, "webhook-secret", "FLASHGATE_GATEWAY_WEBHOOK_SECRET", "webhook signing secrets, comma-separated; each adds a v1= signature (required)")
	env.Secret(&c.Gateway.APIKey, "api-key", "FLASHGATE_GATEWAY_API_KEY", "the API key (required): the bearer token of the flashgate and Stripe APIs; with -personality razorpay, the key secret of key id "+sandboxgateway.RazorpayKeyID+" (basic auth)")
	env.Secret(&c.Gateway.ControlToken, "control-token", "FLASHGATE_GATEWAY_CONTROL_TOKEN",
		fmt.Sprintf("bearer token every /sandbox/* route requires; pay and fail also take the intent's key from its pay_url (required, at least %d bytes, not the API key)", sandboxgateway.MinControlTokenLen))
	env.Duration(&c.Gateway.Latency, "latency", "FLASHGATE_GATEWAY_LATENCY", "delay before answering each /v1 call")
	env.Float64(&c.Gateway.FailureRate, "failure-rate", "FLASHGATE_GATEWAY_FAILURE_RATE", "probability, 0 to 1, that a /v1 call is answered 503 unavailable")
	env.Float64(&c.Gateway.DuplicateRate, "duplicate-rate", "FLASHGATE_GATEWAY_DUPLICATE_RATE", "probability, 0 to 1, that a delivered webhook is delivered again")
	env.Int(&c.Gateway.MaxAttempts, "max-attempts", "FLASHGATE_GATEWAY_MAX_ATTEMPTS", "webhook deliveries per event, the first included")
	env.Duration(&c.Gateway.RetryBase, "retry-base", "FLASHGATE_GATEWAY_RETRY_BASE", "wait after the first failed delivery; doubles per attempt")
	env.Duration(&c.Gateway.RetryMax, "retry-max", "FLASHGATE_GATEWAY_RETRY_MAX", "longest wait between deliveries")
	env.Duration(&c.Gateway.DeliveryTimeout, "delivery-timeout", "FLASHGATE_GATEWAY_DELIVERY_TIMEOUT", "time one delivery attempt may take")
	env.Int64(&c.Gateway.Seed, "seed", "FLASHGATE_GATEWAY_SEED", "seed of the failure, duplicate and jitter randomness; 0: random")
	env.Duration(&c.ShutdownTimeout, "shutdown-timeout", "FLASHGATE_GATEWAY_SHUTDOWN_TIMEOUT", "how long stopping may take")
	if err := env.Parse(args, getenv); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.Gateway.WebhookSecrets = splitList(secrets)
	return c, c.Validate()
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
