package main

import (
	"flag"
	"io"

	"github.com/flashgate/flashgate/internal/envflag"
	"github.com/flashgate/flashgate/internal/listenaddr"
	"github.com/flashgate/flashgate/origin/internal/app"
)

// loadConfig reads the origin's Config: app.DefaultConfig, then each
// flag's environment variable when set (a secret's also from the file
// $NAME_FILE names), then the flags in args, which win. A variable that
// does not parse is an error naming it. It refuses listeners that share an
// address, and dev mode beyond loopback unless allowed; warnings are what
// start-up logs at WARN (among them user tokens' unchecked iss or aud).
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (app.Config, []string, error) {
	c := app.DefaultConfig()
	fs := flag.NewFlagSet("origin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := envflag.New(fs)
	env.String(&c.Addr, "addr", "FLASHGATE_ORIGIN_ADDR", "public listen address")
	env.String(&c.AdminAddr, "admin-addr", "FLASHGATE_ORIGIN_ADMIN_ADDR", "admin listen address")
	env.Secret(&c.RedisURL, "redis-url", "FLASHGATE_REDIS_URL", "Redis URL (with Sentinels: only its username, password and db count)")
	env.String(&c.RedisSentinels, "redis-sentinels", "FLASHGATE_REDIS_SENTINELS", "comma-separated host:port of Redis Sentinels (empty: the URL names the server)")
	env.String(&c.RedisMasterName, "redis-master", "FLASHGATE_REDIS_MASTER", "the Redis primary's name at the Sentinels")
	env.String(&c.RedisCluster, "redis-cluster", "FLASHGATE_REDIS_CLUSTER", "comma-separated host:port of Redis Cluster nodes (empty: no cluster)")
	env.Secret(&c.RedisSentinelPassword, "redis-sentinel-password", "FLASHGATE_REDIS_SENTINEL_PASSWORD", "the Sentinels' own password (empty: none)")
	env.Secret(&c.PostgresURL, "postgres-url", "FLASHGATE_POSTGRES_URL", "Postgres URL")
	env.String(&c.RedisPrefix, "redis-prefix", "FLASHGATE_REDIS_PREFIX", "prefix of every Redis key")
	env.Int(&c.PostgresMaxConns, "postgres-max-conns", "FLASHGATE_POSTGRES_MAX_CONNS", "connections in the Postgres pool")
	env.Secret(&c.AdminToken, "admin-token", "FLASHGATE_ORIGIN_ADMIN_TOKEN",
		"bearer token of the admin listener, 32 random bytes' worth: openssl rand -base64 32 (required)", sharedAdminToken)
	env.Bool(&c.Dev, "dev", "FLASHGATE_DEV", "dev mode: POST /admin/dev/admission-token, user tokens checked with the dev secret; loopback listeners only")
	env.Secret(&c.DevUserTokenSecret, "dev-user-token-secret", "FLASHGATE_DEV_USER_TOKEN_SECRET", "dev mode: HS256 secret of dev logins' user tokens, the edges' too")
	var devAnyInterface bool
	env.Bool(&devAnyInterface, "dev-allow-non-loopback", listenaddr.DevAnyInterfaceEnv, "dev mode: allow listeners beyond loopback (logged at WARN)")
	env.Secret(&c.TokenKeys, "token-keys", "FLASHGATE_TOKEN_KEYS", "admission-token keys kid:base64secret,...; the first signs (required)")
	env.Secret(&c.UserTokenSecret, "user-token-secret", "FLASHGATE_USER_TOKEN_SECRET", "HS256 secret of the shop's user tokens")
	env.String(&c.UserTokenPublicKeyFile, "user-token-public-key-file", "FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE", "PEM Ed25519 or RSA public key of the shop's user tokens")
	env.String(&c.UserTokenIssuer, "user-token-issuer", "FLASHGATE_USER_TOKEN_ISSUER", "required iss of user tokens (empty: not checked, so tokens the shop issues for other purposes pass; logged at WARN)")
	env.String(&c.UserTokenAudience, "user-token-audience", "FLASHGATE_USER_TOKEN_AUDIENCE", "required aud of user tokens (empty: not checked, so tokens the shop issues for other purposes pass; logged at WARN)")
	env.String(&c.LineAudience, "line-audience", "FLASHGATE_LINE_AUDIENCE", "the origin's own name, which edges sign line requests for, the same as theirs (empty: the public listen address, which must then name a host)")
	env.String(&c.Instance, "instance", "FLASHGATE_INSTANCE", "this origin's stream consumer name, stable across restarts")
	env.Int(&c.WriterBatch, "writer-batch", "FLASHGATE_WRITER_BATCH", "intents per Postgres transaction")
	env.Duration(&c.WriterClaimIdle, "writer-claim-idle", "FLASHGATE_WRITER_CLAIM_IDLE", "lease of a sale's intents stream: a writer silent this long is taken over")
	env.Duration(&c.WriterPoll, "writer-poll", "FLASHGATE_WRITER_POLL", "how long the order writer's read of new intents waits, and how often it looks for new sales")
	env.Duration(&c.SweepInterval, "sweep-interval", "FLASHGATE_SWEEP_INTERVAL", "how often expired holds are released")
	env.Duration(&c.RequestBudget, "request-budget", "FLASHGATE_REQUEST_BUDGET", "Redis and Postgres time one request may use")
	env.Duration(&c.ReadTimeout, "read-timeout", "FLASHGATE_READ_TIMEOUT", "time to read one request from its first byte (408 after; a new connection that sends nothing is closed)")
	env.Int(&c.MaxRequestHeadBytes, "max-request-head-bytes", "FLASHGATE_MAX_REQUEST_HEAD_BYTES", "largest request line and headers (431 beyond); keep it above the edge's")
	env.Duration(&c.ShutdownTimeout, "shutdown-timeout", "FLASHGATE_SHUTDOWN_TIMEOUT", "how long shutdown may drain")
	env.Duration(&c.RedisRetention, "redis-retention", "FLASHGATE_REDIS_RETENTION", "how long per-shopper Redis keys are kept")
	env.Int(&c.ReservePipelines, "reserve-pipelines", "FLASHGATE_RESERVE_PIPELINES", "reserve pipelines in flight at once")
	env.Int(&c.ReserveMaxBatch, "reserve-max-batch", "FLASHGATE_RESERVE_MAX_BATCH", "reserves per pipeline")
	env.Bool(&c.ReserveJournal, "reserve-journal", "FLASHGATE_RESERVE_JOURNAL", "journal every granted reserve in Postgres before answering it (0 turns it off)")
	env.Int(&c.MaxHoldsPerAccount, "max-holds-per-account", "FLASHGATE_MAX_HOLDS_PER_ACCOUNT", "holds one account may take in a sale, those that ran out or were cancelled included (0: no cap)")
	env.Int(&c.ReserveWaitReplicas, "reserve-wait-replicas", "FLASHGATE_RESERVE_WAIT_REPLICAS", "Redis replicas each reserve pipeline waits for (WAIT) before answering; 0 = none")
	env.Duration(&c.RedisCheckInterval, "redis-check-interval", "FLASHGATE_REDIS_CHECK_INTERVAL", "how often Redis is checked for sales whose state it lost")
	env.Duration(&c.ReserveWaitTimeout, "reserve-wait-timeout", "FLASHGATE_RESERVE_WAIT_TIMEOUT", "how long a reserve pipeline's WAIT may take")
	env.String(&c.PaymentProvider, "payment-provider", "FLASHGATE_PAYMENT_PROVIDER", "who takes the money: sandbox (the sandbox gateway), stripe or razorpay (docs/PAYMENTS.md)")
	env.String(&c.GatewayURL, "gateway-url", "FLASHGATE_GATEWAY_URL", "base URL of the sandbox gateway's API")
	env.Secret(&c.GatewayAPIKey, "gateway-api-key", "FLASHGATE_GATEWAY_API_KEY", "merchant API key at the payment gateway (empty: orders and payments are off)")
	env.Secret(&c.WebhookSecrets, "webhook-secret", "FLASHGATE_GATEWAY_WEBHOOK_SECRET", "secrets of the gateway's webhook signatures, comma-separated; any may match (rotation)")
	env.Secret(&c.StripeSecretKey, "stripe-secret-key", "FLASHGATE_STRIPE_SECRET_KEY", "Stripe secret API key, sk_... (with -payment-provider stripe)")
	env.Secret(&c.StripeWebhookSecrets, "stripe-webhook-secret", "FLASHGATE_STRIPE_WEBHOOK_SECRET", "Stripe webhook signing secrets, whsec_..., comma-separated; any may match (rotation)")
	env.String(&c.StripeAPIURL, "stripe-api-url", "FLASHGATE_STRIPE_API_URL", "Stripe API base URL (empty: Stripe's; for stripe-mock or the sandbox playing Stripe)")
	env.String(&c.RazorpayKeyID, "razorpay-key-id", "FLASHGATE_RAZORPAY_KEY_ID", "Razorpay key id, rzp_... (with -payment-provider razorpay)")
	env.Secret(&c.RazorpayKeySecret, "razorpay-key-secret", "FLASHGATE_RAZORPAY_KEY_SECRET", "Razorpay key secret")
	env.Secret(&c.RazorpayWebhookSecrets, "razorpay-webhook-secret", "FLASHGATE_RAZORPAY_WEBHOOK_SECRET", "Razorpay webhook secrets, comma-separated; any may match (rotation)")
	env.String(&c.RazorpayAPIURL, "razorpay-api-url", "FLASHGATE_RAZORPAY_API_URL", "Razorpay API base URL (empty: Razorpay's; for the sandbox playing Razorpay)")
	env.Duration(&c.PaymentGrace, "payment-grace", "FLASHGATE_PAYMENT_GRACE", "how much longer a hold lives once its payment starts (given once)")
	env.String(&c.PaymentReturnURL, "payment-return-url", "FLASHGATE_PAYMENT_RETURN_URL", "where the gateway's pay page sends the shopper afterwards (empty: no link)")
	env.Duration(&c.ReconcileInterval, "reconcile-interval", "FLASHGATE_RECONCILE_INTERVAL", "how often gateway records are reconciled with orders (0: not by this origin)")
	env.Duration(&c.AutotunePeriod, "autotune-period", "FLASHGATE_AUTOTUNE_PERIOD", "how often the admission controller may change the rate of a sale ops switched autotune on for")
	env.Duration(&c.OrderIntentWait, "order-intent-wait", "FLASHGATE_ORDER_INTENT_WAIT", "how long an order request waits for the gateway's payment link before answering without it (the page then reads the order)")
	if err := env.Parse(args, getenv); err != nil {
		return app.Config{}, nil, err
	}
	if err := c.Validate(); err != nil {
		return app.Config{}, nil, err
	}
	warnings, err := listenaddr.Check(c.Dev, devAnyInterface,
		listenaddr.Listener{Name: "FLASHGATE_ORIGIN_ADDR", Addr: c.Addr}, listenaddr.Listener{Name: "FLASHGATE_ORIGIN_ADMIN_ADDR", Addr: c.AdminAddr})
	if err != nil {
		return app.Config{}, nil, err
	}
	warnings = append(warnings, c.Warnings()...)
	if env.Source("admin-token") == sharedAdminToken {
		warnings = append(warnings, "one admin token ("+sharedAdminToken+") serves the origins and the edges: "+
			"whoever holds one tier's runs the other's admin API; set FLASHGATE_ORIGIN_ADMIN_TOKEN and FLASHGATE_EDGE_ADMIN_TOKEN instead")
	}
	return c, warnings, nil
}

// sharedAdminToken is the variable the admin token falls back to: one token
// for both tiers, as before each tier had its own.
const sharedAdminToken = "FLASHGATE_ADMIN_TOKEN"
