package main

import (
	"flag"
	"io"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/edge/internal/app"
)

// loadConfig reads flags from args; each flag's default comes from its
// environment variable when set, else from app.DefaultConfig.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (app.Config, error) {
	c := app.DefaultConfig()
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(name, usage string) (string, string) { return getenv(name), usage + " ($" + name + ")" }
	str := func(p *string, flagName, envName, usage string) {
		v, u := env(envName, usage)
		if v != "" {
			*p = v
		}
		fs.StringVar(p, flagName, *p, u)
	}
	dur := func(p *time.Duration, flagName, envName, usage string) {
		v, u := env(envName, usage)
		if d, err := time.ParseDuration(v); err == nil {
			*p = d
		}
		fs.DurationVar(p, flagName, *p, u)
	}
	num := func(p *int, flagName, envName, usage string) {
		v, u := env(envName, usage)
		if n, err := strconv.Atoi(v); err == nil {
			*p = n
		}
		fs.IntVar(p, flagName, *p, u)
	}
	str(&c.Addr, "addr", "FLASHGATE_EDGE_ADDR", "public listen address")
	str(&c.AdminAddr, "admin-addr", "FLASHGATE_EDGE_ADMIN_ADDR", "admin listen address")
	str(&c.RedisURL, "redis-url", "FLASHGATE_REDIS_URL", "Redis URL (with Sentinels: only its username, password and db count)")
	str(&c.RedisSentinels, "redis-sentinels", "FLASHGATE_REDIS_SENTINELS", "comma-separated host:port of Redis Sentinels (empty: the URL names the server)")
	str(&c.RedisMasterName, "redis-master", "FLASHGATE_REDIS_MASTER", "the Redis primary's name at the Sentinels")
	str(&c.RedisSentinelPassword, "redis-sentinel-password", "FLASHGATE_REDIS_SENTINEL_PASSWORD", "the Sentinels' own password (empty: none)")
	str(&c.RedisPrefix, "redis-prefix", "FLASHGATE_REDIS_PREFIX", "prefix of every Redis key")
	str(&c.OriginURL, "origin-url", "FLASHGATE_ORIGIN_URL", "the origin's public listener")
	str(&c.LineAudience, "line-audience", "FLASHGATE_LINE_AUDIENCE", "the audience the node's signed line requests name; the origins' value (empty: the origin URL's host)")
	str(&c.ShopURL, "shop-url", "FLASHGATE_SHOP_URL", "the shop's upstream for every other path (empty: 404)")
	str(&c.AdminToken, "admin-token", "FLASHGATE_ADMIN_TOKEN", "bearer token of the admin listener (required)")
	c.Dev = getenv("FLASHGATE_DEV") == "1" || getenv("FLASHGATE_DEV") == "true"
	fs.BoolVar(&c.Dev, "dev", c.Dev, "dev mode: POST /v1/dev/login ($FLASHGATE_DEV=1)")
	str(&c.TokenKeys, "token-keys", "FLASHGATE_TOKEN_KEYS", "queue/admission-token keys kid:base64secret,...; the first signs (required)")
	dur(&c.AdmissionTokenTTL, "admission-token-ttl", "FLASHGATE_ADMISSION_TOKEN_TTL", "lifetime of an admission token")
	str(&c.UserTokenSecret, "user-token-secret", "FLASHGATE_USER_TOKEN_SECRET", "HS256 secret of the shop's user tokens")
	str(&c.UserTokenPublicKeyFile, "user-token-public-key-file", "FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE", "PEM Ed25519 or RSA public key of the shop's user tokens")
	str(&c.UserTokenIssuer, "user-token-issuer", "FLASHGATE_USER_TOKEN_ISSUER", "required iss of user tokens (empty: not checked)")
	str(&c.UserTokenAudience, "user-token-audience", "FLASHGATE_USER_TOKEN_AUDIENCE", "required aud of user tokens (empty: not checked)")
	rate := strconv.FormatFloat(c.DefaultRatePerSecond, 'f', -1, 64)
	str(&rate, "default-rate", "FLASHGATE_DEFAULT_RATE", "admission rate per second a sale's line starts with until ops set one")
	dur(&c.Tick, "tick", "FLASHGATE_TICK", "how often the admission cursor advances")
	dur(&c.SnapshotRefresh, "snapshot-refresh", "FLASHGATE_SNAPSHOT_REFRESH", "how often sale snapshots are fetched from origin")
	dur(&c.StaleAfter, "stale-after", "FLASHGATE_STALE_AFTER", "cursor age at which sale endpoints answer please_wait")
	dur(&c.SnapshotStaleAfter, "snapshot-stale-after", "FLASHGATE_SNAPSHOT_STALE_AFTER", "snapshot age at which a sale's endpoints answer please_wait and the node is not ready")
	dur(&c.LineBlockWindow, "line-block-window", "FLASHGATE_LINE_BLOCK_WINDOW", "durable join ceilings are raised a block ahead: this long of joins at the recent rate")
	num(&c.LineMinBlock, "line-min-block", "FLASHGATE_LINE_MIN_BLOCK", "smallest block of places a durable join ceiling is raised by")
	str(&c.TrustedProxies, "trusted-proxies", "FLASHGATE_TRUSTED_PROXIES", "comma-separated CIDRs whose X-Forwarded-For is believed")
	num(&c.OriginMaxConns, "origin-max-conns", "FLASHGATE_ORIGIN_MAX_CONNS", "connections to origin for reserves")
	dur(&c.OriginQueueTimeout, "origin-queue-timeout", "FLASHGATE_ORIGIN_QUEUE_TIMEOUT", "how long a request may wait for a free origin connection (0: fail at once)")
	num(&c.OriginPaymentsMaxConns, "origin-payments-max-conns", "FLASHGATE_ORIGIN_PAYMENTS_MAX_CONNS", "connections to origin for orders, reservations and the payment webhook")
	dur(&c.OriginTimeout, "origin-timeout", "FLASHGATE_ORIGIN_TIMEOUT", "one proxied origin exchange")
	num(&c.ShopMaxConns, "shop-max-conns", "FLASHGATE_SHOP_MAX_CONNS", "connections to the shop")
	dur(&c.ShopTimeout, "shop-timeout", "FLASHGATE_SHOP_TIMEOUT", "one proxied shop exchange")
	str(&c.LimitJoinIP, "limit-join-ip", "FLASHGATE_LIMIT_JOIN_IP", "joins per client IP (n-S|M|H; empty: off)")
	str(&c.LimitJoinAccount, "limit-join-account", "FLASHGATE_LIMIT_JOIN_ACCOUNT", "joins per account")
	str(&c.LimitPollIP, "limit-poll-ip", "FLASHGATE_LIMIT_POLL_IP", "status polls per client IP")
	str(&c.LimitPollAccount, "limit-poll-account", "FLASHGATE_LIMIT_POLL_ACCOUNT", "status polls per account")
	str(&c.LimitReserveIP, "limit-reserve-ip", "FLASHGATE_LIMIT_RESERVE_IP", "reserves per client IP")
	str(&c.LimitReserveAccount, "limit-reserve-account", "FLASHGATE_LIMIT_RESERVE_ACCOUNT", "reserves per account")
	dur(&c.ShutdownTimeout, "shutdown-timeout", "FLASHGATE_SHUTDOWN_TIMEOUT", "how long shutdown may drain")
	if err := fs.Parse(args); err != nil {
		return app.Config{}, err
	}
	var err error
	if c.DefaultRatePerSecond, err = strconv.ParseFloat(rate, 64); err != nil {
		return app.Config{}, err
	}
	return c, c.Validate()
}
