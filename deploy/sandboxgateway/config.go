package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flashgate/flashgate/deploy/sandboxgateway/gateway"
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
	Gateway gateway.Config
}

// defaultConfig is the configuration before flags and environment: the
// local stack's ports, and a gateway that duplicates one delivery in ten.
func defaultConfig() config {
	return config{
		Addr:            ":9300",
		ShutdownTimeout: 10 * time.Second,
		Gateway: gateway.Config{
			PublicURL:       "http://127.0.0.1:9300",
			WebhookURL:      "http://127.0.0.1:8080/v1/payments/webhook",
			DuplicateRate:   0.1,
			MaxAttempts:     gateway.DefaultMaxAttempts,
			RetryBase:       gateway.DefaultRetryBase,
			RetryMax:        gateway.DefaultRetryMax,
			DeliveryTimeout: gateway.DefaultDeliveryTimeout,
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
	case c.Gateway.APIKey == "":
		return errors.New("-api-key ($FLASHGATE_GATEWAY_API_KEY) is required")
	case len(c.Gateway.WebhookSecrets) == 0:
		return errors.New("-webhook-secret ($FLASHGATE_GATEWAY_WEBHOOK_SECRET) is required")
	}
	return c.Gateway.Validate()
}

// loadConfig reads the configuration: defaults, then environment variables,
// then flags in args, which win.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	var secrets string
	fs := flag.NewFlagSet("sandboxgateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: sandboxgateway [flags]\n\n"+
			"A sandbox UPI-style payment gateway for development and tests. Each flag may\n"+
			"also be set by the environment variable named after it; the flag wins.\n\n")
		fs.PrintDefaults()
	}

	type binding struct{ flag, env string }
	var bindings []binding
	bind := func(name, env, usage string) string {
		bindings = append(bindings, binding{name, env})
		return usage + " ($" + env + ")"
	}
	fs.StringVar(&c.Addr, "addr", c.Addr, bind("addr", "FLASHGATE_GATEWAY_ADDR", "listen address"))
	fs.StringVar(&c.Gateway.PublicURL, "public-url", c.Gateway.PublicURL,
		bind("public-url", "FLASHGATE_GATEWAY_PUBLIC_URL", "base URL shoppers reach the pay page at; pay_url is <public-url>/pay/<intent_id>"))
	fs.StringVar(&c.Gateway.WebhookURL, "webhook-url", c.Gateway.WebhookURL,
		bind("webhook-url", "FLASHGATE_GATEWAY_WEBHOOK_URL", "where events are POSTed; empty: recorded, never sent"))
	fs.StringVar(&secrets, "webhook-secret", "",
		bind("webhook-secret", "FLASHGATE_GATEWAY_WEBHOOK_SECRET", "webhook signing secrets, comma-separated; each adds a v1= signature (required)"))
	fs.StringVar(&c.Gateway.APIKey, "api-key", "",
		bind("api-key", "FLASHGATE_GATEWAY_API_KEY", "bearer token the API requires (required)"))
	fs.DurationVar(&c.Gateway.Latency, "latency", c.Gateway.Latency,
		bind("latency", "FLASHGATE_GATEWAY_LATENCY", "delay before answering each /v1 call"))
	fs.Float64Var(&c.Gateway.FailureRate, "failure-rate", c.Gateway.FailureRate,
		bind("failure-rate", "FLASHGATE_GATEWAY_FAILURE_RATE", "probability, 0 to 1, that a /v1 call is answered 503 unavailable"))
	fs.Float64Var(&c.Gateway.DuplicateRate, "duplicate-rate", c.Gateway.DuplicateRate,
		bind("duplicate-rate", "FLASHGATE_GATEWAY_DUPLICATE_RATE", "probability, 0 to 1, that a delivered webhook is delivered again"))
	fs.IntVar(&c.Gateway.MaxAttempts, "max-attempts", c.Gateway.MaxAttempts,
		bind("max-attempts", "FLASHGATE_GATEWAY_MAX_ATTEMPTS", "webhook deliveries per event, the first included"))
	fs.DurationVar(&c.Gateway.RetryBase, "retry-base", c.Gateway.RetryBase,
		bind("retry-base", "FLASHGATE_GATEWAY_RETRY_BASE", "wait after the first failed delivery; doubles per attempt"))
	fs.DurationVar(&c.Gateway.RetryMax, "retry-max", c.Gateway.RetryMax,
		bind("retry-max", "FLASHGATE_GATEWAY_RETRY_MAX", "longest wait between deliveries"))
	fs.DurationVar(&c.Gateway.DeliveryTimeout, "delivery-timeout", c.Gateway.DeliveryTimeout,
		bind("delivery-timeout", "FLASHGATE_GATEWAY_DELIVERY_TIMEOUT", "time one delivery attempt may take"))
	fs.Int64Var(&c.Gateway.Seed, "seed", c.Gateway.Seed,
		bind("seed", "FLASHGATE_GATEWAY_SEED", "seed of the failure, duplicate and jitter randomness; 0: random"))
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout,
		bind("shutdown-timeout", "FLASHGATE_GATEWAY_SHUTDOWN_TIMEOUT", "how long stopping may take"))

	for _, b := range bindings {
		if v := getenv(b.env); v != "" {
			if err := fs.Set(b.flag, v); err != nil {
				return config{}, fmt.Errorf("$%s=%q is not a valid -%s: %w", b.env, v, b.flag, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
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
