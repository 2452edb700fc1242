package main

import (
	"flag"
	"io"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/origin/internal/app"
)

// loadConfig reads flags from args with defaults from getenv.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (app.Config, error) {
	c := app.DefaultConfig()
	fs := flag.NewFlagSet("origin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	str := func(p *string, name, env, usage string) {
		if v := getenv(env); v != "" {
			*p = v
		}
		fs.StringVar(p, name, *p, usage+" ($"+env+")")
	}
	dur := func(p *time.Duration, name, env, usage string) {
		if v := getenv(env); v != "" {
			if d, err := time.ParseDuration(v); err == nil {
				*p = d
			}
		}
		fs.DurationVar(p, name, *p, usage+" ($"+env+")")
	}
	num := func(p *int, name, env, usage string) {
		if v := getenv(env); v != "" {
			if n, err := strconv.Atoi(v); err == nil {
				*p = n
			}
		}
		fs.IntVar(p, name, *p, usage+" ($"+env+")")
	}
	str(&c.Addr, "addr", "FLASHGATE_ORIGIN_ADDR", "public listen address")
	str(&c.AdminAddr, "admin-addr", "FLASHGATE_ORIGIN_ADMIN_ADDR", "admin listen address")
	str(&c.RedisURL, "redis-url", "FLASHGATE_REDIS_URL", "Redis URL (with Sentinels: only its username, password and db count)")
	str(&c.RedisSentinels, "redis-sentinels", "FLASHGATE_REDIS_SENTINELS", "comma-separated host:port of Redis Sentinels (empty: the URL names the server)")
	str(&c.RedisMasterName, "redis-master", "FLASHGATE_REDIS_MASTER", "the Redis primary's name at the Sentinels")
	str(&c.RedisSentinelPassword, "redis-sentinel-password", "FLASHGATE_REDIS_SENTINEL_PASSWORD", "the Sentinels' own password (empty: none)")
	str(&c.PostgresURL, "postgres-url", "FLASHGATE_POSTGRES_URL", "Postgres URL")
	str(&c.RedisPrefix, "redis-prefix", "FLASHGATE_REDIS_PREFIX", "prefix of every Redis key")
	num(&c.PostgresMaxConns, "postgres-max-conns", "FLASHGATE_POSTGRES_MAX_CONNS", "connections in the Postgres pool")
	str(&c.AdminToken, "admin-token", "FLASHGATE_ADMIN_TOKEN", "bearer token of the admin listener (required)")
	c.Dev = getenv("FLASHGATE_DEV") == "1" || getenv("FLASHGATE_DEV") == "true"
	fs.BoolVar(&c.Dev, "dev", c.Dev, "dev mode: dev-only endpoints ($FLASHGATE_DEV=1)")
	str(&c.TokenKeys, "token-keys", "FLASHGATE_TOKEN_KEYS", "admission-token keys kid:base64secret,...; the first signs (required)")
	str(&c.UserTokenSecret, "user-token-secret", "FLASHGATE_USER_TOKEN_SECRET", "HS256 secret of the shop's user tokens")
	str(&c.UserTokenPublicKeyFile, "user-token-public-key-file", "FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE", "PEM Ed25519 or RSA public key of the shop's user tokens")
	str(&c.UserTokenIssuer, "user-token-issuer", "FLASHGATE_USER_TOKEN_ISSUER", "required iss of user tokens (empty: not checked)")
	str(&c.UserTokenAudience, "user-token-audience", "FLASHGATE_USER_TOKEN_AUDIENCE", "required aud of user tokens (empty: not checked)")
	str(&c.LineAudience, "line-audience", "FLASHGATE_LINE_AUDIENCE", "the audience edges sign line requests for (empty: the Host they carry)")
	str(&c.Instance, "instance", "FLASHGATE_INSTANCE", "this origin's stream consumer name, stable across restarts")
	num(&c.WriterBatch, "writer-batch", "FLASHGATE_WRITER_BATCH", "intents per Postgres transaction")
	dur(&c.WriterClaimIdle, "writer-claim-idle", "FLASHGATE_WRITER_CLAIM_IDLE", "lease of a sale's intents stream: a writer silent this long is taken over")
	dur(&c.SweepInterval, "sweep-interval", "FLASHGATE_SWEEP_INTERVAL", "how often expired holds are released")
	dur(&c.RequestBudget, "request-budget", "FLASHGATE_REQUEST_BUDGET", "Redis and Postgres time one request may use")
	dur(&c.ShutdownTimeout, "shutdown-timeout", "FLASHGATE_SHUTDOWN_TIMEOUT", "how long shutdown may drain")
	dur(&c.RedisRetention, "redis-retention", "FLASHGATE_REDIS_RETENTION", "how long per-shopper Redis keys are kept")
	num(&c.ReservePipelines, "reserve-pipelines", "FLASHGATE_RESERVE_PIPELINES", "reserve pipelines in flight at once")
	num(&c.ReserveMaxBatch, "reserve-max-batch", "FLASHGATE_RESERVE_MAX_BATCH", "reserves per pipeline")
	switch getenv("FLASHGATE_RESERVE_JOURNAL") {
	case "0", "false":
		c.ReserveJournal = false
	case "1", "true":
		c.ReserveJournal = true
	}
	fs.BoolVar(&c.ReserveJournal, "reserve-journal", c.ReserveJournal, "journal every granted reserve in Postgres before answering it ($FLASHGATE_RESERVE_JOURNAL=0 turns it off)")
	num(&c.ReserveWaitReplicas, "reserve-wait-replicas", "FLASHGATE_RESERVE_WAIT_REPLICAS", "Redis replicas each reserve pipeline waits for (WAIT) before answering; 0 = none")
	dur(&c.RedisCheckInterval, "redis-check-interval", "FLASHGATE_REDIS_CHECK_INTERVAL", "how often Redis is checked for sales whose state it lost")
	dur(&c.ReserveWaitTimeout, "reserve-wait-timeout", "FLASHGATE_RESERVE_WAIT_TIMEOUT", "how long a reserve pipeline's WAIT may take")
	str(&c.GatewayURL, "gateway-url", "FLASHGATE_GATEWAY_URL", "base URL of the payment gateway's API")
	str(&c.GatewayAPIKey, "gateway-api-key", "FLASHGATE_GATEWAY_API_KEY", "merchant API key at the payment gateway (empty: orders and payments are off)")
	str(&c.WebhookSecrets, "webhook-secret", "FLASHGATE_GATEWAY_WEBHOOK_SECRET", "secrets of the gateway's webhook signatures, comma-separated; any may match (rotation)")
	dur(&c.PaymentGrace, "payment-grace", "FLASHGATE_PAYMENT_GRACE", "how much longer a hold lives once its payment starts (given once)")
	str(&c.PaymentReturnURL, "payment-return-url", "FLASHGATE_PAYMENT_RETURN_URL", "where the gateway's pay page sends the shopper afterwards (empty: no link)")
	dur(&c.ReconcileInterval, "reconcile-interval", "FLASHGATE_RECONCILE_INTERVAL", "how often gateway records are reconciled with orders (0: not by this origin)")
	if err := fs.Parse(args); err != nil {
		return app.Config{}, err
	}
	return c, c.Validate()
}
