package main

import (
	"flag"
	"io"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/internal/envflag"
	"github.com/flashgate/flashgate/internal/listenaddr"
)

// loadConfig reads the edge's Config: app.DefaultConfig, then each flag's
// environment variable when set (a secret's also from the file
// $NAME_FILE names), then the flags in args, which win. A variable that
// does not parse is an error naming it. It refuses listeners that share an
// address, and dev mode beyond loopback unless allowed; warnings are what
// start-up logs at WARN (among them user tokens' unchecked iss or aud).
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (app.Config, []string, error) {
	c := app.DefaultConfig()
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := envflag.New(fs)
	env.String(&c.Addr, "addr", "FLASHGATE_EDGE_ADDR", "public listen address")
	env.String(&c.AdminAddr, "admin-addr", "FLASHGATE_EDGE_ADMIN_ADDR", "admin listen address")
	env.String(&c.Instance, "instance", "FLASHGATE_INSTANCE", "this node's name on the ops dashboard's roster (default: host name and a random suffix)")
	env.Secret(&c.RedisURL, "redis-url", "FLASHGATE_REDIS_URL", "Redis URL (with Sentinels: only its username, password and db count)")
	env.String(&c.RedisSentinels, "redis-sentinels", "FLASHGATE_REDIS_SENTINELS", "comma-separated host:port of Redis Sentinels (empty: the URL names the server)")
	env.String(&c.RedisMasterName, "redis-master", "FLASHGATE_REDIS_MASTER", "the Redis primary's name at the Sentinels")
	env.String(&c.RedisCluster, "redis-cluster", "FLASHGATE_REDIS_CLUSTER", "comma-separated host:port of Redis Cluster nodes (empty: no cluster)")
	env.Secret(&c.RedisSentinelPassword, "redis-sentinel-password", "FLASHGATE_REDIS_SENTINEL_PASSWORD", "the Sentinels' own password (empty: none)")
	env.String(&c.RedisPrefix, "redis-prefix", "FLASHGATE_REDIS_PREFIX", "prefix of every Redis key")
	env.String(&c.OriginURL, "origin-url", "FLASHGATE_ORIGIN_URL", "the origin's public listener")
	env.String(&c.LineAudience, "line-audience", "FLASHGATE_LINE_AUDIENCE", "the audience the node's signed line requests name; the origins' value (empty: the origin URL's host)")
	env.String(&c.ShopURL, "shop-url", "FLASHGATE_SHOP_URL", "the shop's upstream for every other path (empty: 404)")
	env.Secret(&c.AdminToken, "admin-token", "FLASHGATE_EDGE_ADMIN_TOKEN",
		"bearer token of the admin listener, 32 random bytes' worth: openssl rand -base64 32 (required)", sharedAdminToken)
	env.Bool(&c.Dev, "dev", "FLASHGATE_DEV", "dev mode: POST /v1/dev/login signs user tokens for any account; loopback listeners only")
	env.Secret(&c.DevUserTokenSecret, "dev-user-token-secret", "FLASHGATE_DEV_USER_TOKEN_SECRET", "dev mode: HS256 secret of dev logins' user tokens, the origins' too")
	var devAnyInterface bool
	env.Bool(&devAnyInterface, "dev-allow-non-loopback", listenaddr.DevAnyInterfaceEnv, "dev mode: allow listeners beyond loopback (logged at WARN)")
	env.Secret(&c.TokenKeys, "token-keys", "FLASHGATE_TOKEN_KEYS", "queue/admission-token keys kid:base64secret,...; the first signs (required)")
	env.Duration(&c.AdmissionTokenTTL, "admission-token-ttl", "FLASHGATE_ADMISSION_TOKEN_TTL", "lifetime of an admission token")
	env.Secret(&c.UserTokenSecret, "user-token-secret", "FLASHGATE_USER_TOKEN_SECRET", "HS256 secret of the shop's user tokens")
	env.String(&c.UserTokenPublicKeyFile, "user-token-public-key-file", "FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE", "PEM Ed25519 or RSA public key of the shop's user tokens")
	env.String(&c.UserTokenIssuer, "user-token-issuer", "FLASHGATE_USER_TOKEN_ISSUER", "required iss of user tokens (empty: not checked, so tokens the shop issues for other purposes pass; logged at WARN)")
	env.String(&c.UserTokenAudience, "user-token-audience", "FLASHGATE_USER_TOKEN_AUDIENCE", "required aud of user tokens (empty: not checked, so tokens the shop issues for other purposes pass; logged at WARN)")
	env.Float64(&c.DefaultRatePerSecond, "default-rate", "FLASHGATE_DEFAULT_RATE", "admission rate per second of a sale until ops set one")
	env.Duration(&c.Tick, "tick", "FLASHGATE_TICK", "how often the admission cursor advances")
	env.Duration(&c.AdmissionHoldAfter, "admission-hold-after", "FLASHGATE_ADMISSION_HOLD_AFTER", "a tick admits no one when even the quickest origin request since the last one took longer (0: never hold)")
	env.Int(&c.JoinPipelines, "join-pipelines", "FLASHGATE_JOIN_PIPELINES", "join round trips to Redis in flight at once (raise it on edges far from Redis)")
	env.Duration(&c.SnapshotRefresh, "snapshot-refresh", "FLASHGATE_SNAPSHOT_REFRESH", "how often sale snapshots are fetched from origin")
	env.Duration(&c.StaleAfter, "stale-after", "FLASHGATE_STALE_AFTER", "cursor age at which sale endpoints answer please_wait")
	env.Duration(&c.SnapshotStaleAfter, "snapshot-stale-after", "FLASHGATE_SNAPSHOT_STALE_AFTER", "snapshot age at which a sale's endpoints answer please_wait and the node is not ready")
	env.Duration(&c.LineBlockWindow, "line-block-window", "FLASHGATE_LINE_BLOCK_WINDOW", "durable join ceilings are raised a block ahead: this long of joins at the recent rate (at least four times the last raise's round trip)")
	env.Int(&c.LineMinBlock, "line-min-block", "FLASHGATE_LINE_MIN_BLOCK", "smallest block of places a durable join ceiling is raised by")
	env.String(&c.TrustedProxies, "trusted-proxies", "FLASHGATE_TRUSTED_PROXIES", "comma-separated CIDRs of the CDN and load balancers whose X-Forwarded-For, -Host and -Proto are believed (public ranges at least /12 for IPv4, /29 for IPv6)")
	env.Bool(&c.TrustedProxiesAllowWide, "trusted-proxies-allow-wide", "FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE", "accept trusted proxy ranges wider than that (logged at WARN at every start)")
	env.String(&c.PublicHost, "public-host", "FLASHGATE_PUBLIC_HOST", "the host shoppers reach the sale at, sent to the shop and origin as X-Forwarded-Host when no trusted proxy names one (empty: none)")
	env.Int(&c.OriginMaxConns, "origin-max-conns", "FLASHGATE_ORIGIN_MAX_CONNS", "connections to origin for reserves")
	env.Duration(&c.OriginQueueTimeout, "origin-queue-timeout", "FLASHGATE_ORIGIN_QUEUE_TIMEOUT", "how long a request may wait for a free origin connection (0: fail at once)")
	env.Duration(&c.OriginPaymentsQueueTimeout, "origin-payments-queue-timeout", "FLASHGATE_ORIGIN_PAYMENTS_QUEUE_TIMEOUT", "the same for the payments pool (orders, reservations, the webhook)")
	env.Int(&c.OriginPaymentsMaxConns, "origin-payments-max-conns", "FLASHGATE_ORIGIN_PAYMENTS_MAX_CONNS", "connections to origin for orders, reservations and the payment webhook")
	env.Duration(&c.OriginTimeout, "origin-timeout", "FLASHGATE_ORIGIN_TIMEOUT", "one proxied origin exchange")
	env.Int(&c.ShopMaxConns, "shop-max-conns", "FLASHGATE_SHOP_MAX_CONNS", "connections to the shop")
	env.Duration(&c.ShopTimeout, "shop-timeout", "FLASHGATE_SHOP_TIMEOUT", "one proxied shop exchange")
	env.String(&c.LimitJoinIP, "limit-join-ip", "FLASHGATE_LIMIT_JOIN_IP", "joins per client IP (n-S|M|H; empty: off)")
	env.String(&c.LimitJoinAccount, "limit-join-account", "FLASHGATE_LIMIT_JOIN_ACCOUNT", "joins per account")
	env.String(&c.LimitJoinSubnet, "limit-join-subnet", "FLASHGATE_LIMIT_JOIN_SUBNET", "joins per client network: an IPv4 address's /24, an IPv6 address's /48")
	env.String(&c.LimitPollIP, "limit-poll-ip", "FLASHGATE_LIMIT_POLL_IP", "status polls per client IP")
	env.String(&c.LimitPollSubnet, "limit-poll-subnet", "FLASHGATE_LIMIT_POLL_SUBNET", "status polls per client network (/24, IPv6 /48)")
	env.String(&c.LimitPollAccount, "limit-poll-account", "FLASHGATE_LIMIT_POLL_ACCOUNT", "status polls per account")
	env.String(&c.LimitReserveIP, "limit-reserve-ip", "FLASHGATE_LIMIT_RESERVE_IP", "reserves per client IP")
	env.String(&c.LimitReserveAccount, "limit-reserve-account", "FLASHGATE_LIMIT_RESERVE_ACCOUNT", "reserves per account")
	env.String(&c.LimitOrderAccount, "limit-order-account", "FLASHGATE_LIMIT_ORDER_ACCOUNT", "orders created per account")
	env.String(&c.LimitOrderReadAccount, "limit-order-read-account", "FLASHGATE_LIMIT_ORDER_READ_ACCOUNT", "order and reservation reads per account")
	env.String(&c.LimitWebhookIP, "limit-webhook-ip", "FLASHGATE_LIMIT_WEBHOOK_IP", "payment webhooks per client IP")
	env.Int(&c.LimitMaxKeys, "limit-max-keys", "FLASHGATE_LIMIT_MAX_KEYS", "keys each rate limit remembers at most (at the cap the key whose window ends soonest is forgotten)")
	env.String(&c.WebhookAllow, "webhook-allow", "FLASHGATE_WEBHOOK_ALLOW", "comma-separated CIDRs of the payment gateway's addresses; webhooks from elsewhere get 403 (empty: any address)")
	env.Int(&c.WebhookMaxBodyBytes, "webhook-max-body-bytes", "FLASHGATE_WEBHOOK_MAX_BODY_BYTES", "largest payment webhook body (413 beyond)")
	env.Int(&c.MaxHeldSnapshots, "max-held-snapshots", "FLASHGATE_MAX_HELD_SNAPSHOTS", "snapshot watches (?at=) held at once; beyond it they are answered at once")
	env.Duration(&c.ReadTimeout, "read-timeout", "FLASHGATE_READ_TIMEOUT", "time to read one request from its first byte (408 after; a new connection that sends nothing is closed)")
	env.Int(&c.MaxRequestHeadBytes, "max-request-head-bytes", "FLASHGATE_MAX_REQUEST_HEAD_BYTES", "largest request line and headers, cookies included (431 beyond)")
	env.Duration(&c.ShutdownTimeout, "shutdown-timeout", "FLASHGATE_SHUTDOWN_TIMEOUT", "how long shutdown may drain")
	if err := env.Parse(args, getenv); err != nil {
		return app.Config{}, nil, err
	}
	if err := c.Validate(); err != nil {
		return app.Config{}, nil, err
	}
	warnings, err := listenaddr.Check(c.Dev, devAnyInterface,
		listenaddr.Listener{Name: "FLASHGATE_EDGE_ADDR", Addr: c.Addr}, listenaddr.Listener{Name: "FLASHGATE_EDGE_ADMIN_ADDR", Addr: c.AdminAddr})
	if err != nil {
		return app.Config{}, nil, err
	}
	warnings = append(warnings, c.Warnings()...)
	if env.Source("admin-token") == sharedAdminToken {
		warnings = append(warnings, "one admin token ("+sharedAdminToken+") serves the edges and the origins: "+
			"whoever holds one tier's runs the other's admin API; set FLASHGATE_EDGE_ADMIN_TOKEN and FLASHGATE_ORIGIN_ADMIN_TOKEN instead")
	}
	return c, warnings, nil
}

// sharedAdminToken is the variable the admin token falls back to: one token
// for both tiers, as before each tier had its own.
const sharedAdminToken = "FLASHGATE_ADMIN_TOKEN"
