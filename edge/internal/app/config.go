package app

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/ulule/limiter/v3"

	"github.com/flashgate/flashgate/edge/internal/api"
	"github.com/flashgate/flashgate/edge/internal/limitstore"
	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/secretcheck"
	"github.com/flashgate/flashgate/internal/usertokens"
	"github.com/flashgate/flashgate/tokens"
)

// Config is everything an edge node can be told. Units are in the names.
type Config struct {
	Addr      string // public listener (behind the CDN and load balancer)
	AdminAddr string // admin listener: admission settings, metrics; loopback by default
	// Instance names the node on the roster the ops dashboard shows; ""
	// means the host name and a suffix random to this start.
	Instance    string
	RedisURL    string
	RedisPrefix string
	OriginURL   string // the origin's public listener
	ShopURL     string // the shop's own upstream; "" answers 404 outside the sale

	// RedisSentinels are the comma-separated host:port addresses of Redis
	// Sentinels; "" means RedisURL names the one server. With them the
	// node asks the Sentinels for the primary and follows a failover
	// without restart, and of RedisURL only the username, password, db and
	// options count.
	RedisSentinels        string
	RedisMasterName       string // the primary's name at the Sentinels
	RedisSentinelPassword string // the Sentinels' own password; "" = none
	// RedisCluster are comma-separated host:port addresses of Redis
	// Cluster nodes ("" = no cluster); with them the node finds each sale's
	// keys on the node holding their slot, and of RedisURL only the
	// username, password and options count.
	RedisCluster string

	// LineAudience is what the node signs its line requests to the origin
	// for (the origins' FLASHGATE_LINE_AUDIENCE); "" means OriginURL's
	// host, which is the Host the requests carry.
	LineAudience string

	// AdminToken is the admin listener's bearer token: required, and
	// strong (internal/secretcheck: 32 random bytes' worth).
	AdminToken string
	// Dev is dev mode: POST /v1/dev/login on the public listener signs a
	// user token for any account with DevUserTokenSecret, and user tokens
	// are checked with that secret instead of the shop's key, whose
	// settings dev mode refuses (a production configuration with dev mode
	// switched on does not start).
	Dev                bool
	DevUserTokenSecret string // HS256 secret of dev mode's user tokens; the origins' too

	TokenKeys              string        // queue/admission-token keys "kid:base64,..."; first signs
	AdmissionTokenTTL      time.Duration // lifetime of an admission token
	UserTokenSecret        string        // HS256 secret of the shop's user tokens, or
	UserTokenPublicKeyFile string        // a PEM Ed25519/RSA public key file
	// UserTokenIssuer and UserTokenAudience are the iss and aud user
	// tokens must carry; "" = not checked, so that any token the shop
	// signs with its key passes, whatever it was issued for (start-up
	// warns of it outside dev mode). Neither may be our own tokens'.
	UserTokenIssuer   string
	UserTokenAudience string

	DefaultRatePerSecond float64       // admission rate a sale's line starts with until ops set one
	JoinPipelines        int           // join round trips to Redis in flight at once (more for an edge far from Redis: docs/REGIONS.md)
	Tick                 time.Duration // how often the cursor advances and views rebuild
	// AdmissionHoldAfter: a tick admits no one when even the quickest
	// request to an origin pool since the last tick took longer than this
	// (the checkout is behind: admission.CheckoutHold); 0 turns it off.
	AdmissionHoldAfter time.Duration
	SnapshotRefresh    time.Duration // how often sale snapshots are fetched from origin
	StaleAfter         time.Duration // cursor reading age at which sale endpoints say please_wait
	// SnapshotStaleAfter is the age at which a sale's origin snapshot is no
	// longer answered from (its endpoints say please_wait rather than a
	// stale "open"), and at which the list of sales stops proving a sale
	// does not exist (unknown ids say please_wait rather than 404) and the
	// node stops being ready. At least three refreshes.
	SnapshotStaleAfter time.Duration
	// TrustedProxies are the comma-separated CIDRs of the CDN and load
	// balancers in front of the edge, whose X-Forwarded-For, -Host and
	// -Proto are believed. A range wider than a CDN's (widePrefixes) is
	// refused unless TrustedProxiesAllowWide.
	TrustedProxies string
	// TrustedProxiesAllowWide accepts wide trusted ranges, with a warning
	// at every start: every client inside one may name its own address.
	TrustedProxiesAllowWide bool
	// PublicHost is the host shoppers reach the edge at ("shop.example",
	// with a port if not the scheme's), sent upstream as X-Forwarded-Host
	// when no trusted proxy names one; "" sends none.
	PublicHost string

	// The line's durable ceilings (docs/OPERATIONS.md, "When Redis loses
	// the line"): a join counter's ceiling is raised, in the origin first,
	// to a block beyond the counter once the counter is within half a
	// block of it. A block is LineBlockWindow of joins at the recent join
	// rate (longer while raises are slow, and before the start the
	// pre-queue's size for the post counter: line.Options), at least
	// LineMinBlock places. Up to a block of places goes unused after Redis
	// loses the line.
	LineBlockWindow time.Duration
	LineMinBlock    int

	OriginMaxConns int // connections to origin for reserves
	// OriginPaymentsMaxConns are connections to origin for orders,
	// reservations and the payment webhook: their own pool, so slow
	// payments never take the reserve path's connections. (The snapshot
	// refresh has a third pool of snapshotConns.)
	OriginPaymentsMaxConns int
	// OriginQueueTimeout is how long a request may wait for a free origin
	// connection before it is answered please_wait; 0 means not at all.
	OriginQueueTimeout time.Duration
	// OriginPaymentsQueueTimeout is the same for the payments pool: a
	// shopper who pressed Pay waits longer for a connection (a burst of
	// checkouts queues behind a busy origin) rather than hear please_wait.
	OriginPaymentsQueueTimeout time.Duration
	OriginTimeout              time.Duration // one proxied origin exchange
	ShopMaxConns               int           // connections to the shop
	ShopTimeout                time.Duration // one proxied shop exchange

	// Rate limits in ulule/limiter's "<n>-<S|M|H>" form, per client
	// address (an IPv6 address by its /64) and per account, on join,
	// status poll and reserve; "" switches one off. A limiter remembers
	// each key for its period, so the poll limits use a one-second period:
	// the node's memory then follows polls per second, not shoppers in line.
	LimitJoinIP, LimitJoinAccount       string
	LimitPollIP, LimitPollAccount       string
	LimitReserveIP, LimitReserveAccount string
	// LimitJoinSubnet and LimitPollSubnet limit joins and status polls per
	// client network: an IPv4 address's /24, an IPv6 address's /48 (a
	// site's usual allocation; its /64 is the per-address key), of the
	// same client address the per-address limits count. The defaults are
	// ten times the per-address ones, so a campus /24 or a carrier NAT's
	// pool of shoppers is not starved while one network cannot take
	// fresh per-address budgets from each of its addresses. "" = off.
	LimitJoinSubnet, LimitPollSubnet string
	// Per-account limits of the routes the edge passes to origin for a
	// signed-in shopper: creating orders, and reading orders and
	// reservations (one budget for both, which the page polls).
	LimitOrderAccount, LimitOrderReadAccount string
	// LimitWebhookIP limits payment webhooks per client address. A gateway
	// sends about one event per paying shopper, from few addresses: size
	// it above the sale's peak payments per second per gateway address
	// (the gateway retries a 429, later).
	LimitWebhookIP string
	// LimitMaxKeys caps the keys each limit remembers (limitstore: at the
	// cap the key whose window ends soonest is forgotten), so a flood of
	// distinct addresses cannot grow the node's memory.
	LimitMaxKeys int

	// WebhookAllow are the comma-separated CIDRs of the payment gateway's
	// addresses (client addresses, as TrustedProxies tell them); a webhook
	// from elsewhere is answered 403 address_not_allowed. "" = any address.
	WebhookAllow string
	// WebhookMaxBodyBytes bounds a webhook's body; a larger one is
	// answered 413 body_too_large without reaching origin.
	WebhookMaxBodyBytes int
	// MaxHeldSnapshots bounds the snapshot watches (?at=) the node holds
	// at once; beyond it a watch is answered at once, kept nowhere.
	MaxHeldSnapshots int

	// ReadTimeout bounds reading one request, head and body, from its
	// first byte (on a new connection, from the connect): a request still
	// arriving then is answered 408, and a new connection that carried
	// nothing is closed without an answer.
	ReadTimeout time.Duration
	// MaxRequestHeadBytes bounds a request's line and headers, cookies and
	// tokens included; a larger head is answered 431. It is also the read
	// buffer every connection holds while it waits for a request.
	MaxRequestHeadBytes int

	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults every flag starts from.
func DefaultConfig() Config {
	return Config{
		Addr:                       ":8080",
		AdminAddr:                  "127.0.0.1:8081",
		RedisURL:                   "redis://127.0.0.1:6379/0",
		RedisMasterName:            "flashgate",
		RedisPrefix:                "fg:",
		OriginURL:                  "http://127.0.0.1:9090",
		AdmissionTokenTTL:          tokens.DefaultAdmissionTTL,
		DefaultRatePerSecond:       100,
		JoinPipelines:              2,
		Tick:                       100 * time.Millisecond,
		AdmissionHoldAfter:         250 * time.Millisecond,
		SnapshotRefresh:            250 * time.Millisecond,
		StaleAfter:                 3 * time.Second,
		SnapshotStaleAfter:         3 * time.Second,
		LineBlockWindow:            time.Second,
		LineMinBlock:               256,
		OriginMaxConns:             256,
		OriginPaymentsMaxConns:     128,
		OriginQueueTimeout:         time.Second,
		OriginPaymentsQueueTimeout: 3 * time.Second,
		OriginTimeout:              5 * time.Second,
		ShopMaxConns:               256,
		ShopTimeout:                10 * time.Second,
		LimitJoinIP:                "120-M",
		LimitJoinAccount:           "10-M",
		LimitPollIP:                "30-S",
		LimitPollAccount:           "3-S",
		LimitJoinSubnet:            "1200-M",
		LimitPollSubnet:            "300-S",
		LimitReserveIP:             "120-M",
		LimitReserveAccount:        "20-M",
		LimitOrderAccount:          "20-M",
		LimitOrderReadAccount:      "120-M",
		LimitWebhookIP:             "1000-S",
		LimitMaxKeys:               limitstore.DefaultMaxKeys,
		WebhookMaxBodyBytes:        api.DefaultWebhookMaxBodyBytes,
		MaxHeldSnapshots:           api.DefaultMaxHeldSnapshots,
		ReadTimeout:                10 * time.Second,
		MaxRequestHeadBytes:        16 << 10,
		ShutdownTimeout:            15 * time.Second,
	}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.AdminToken == "":
		return errors.New("config: FLASHGATE_EDGE_ADMIN_TOKEN (-admin-token) is required; " + secretcheck.HowToMake)
	case c.TokenKeys == "":
		return errors.New("config: FLASHGATE_TOKEN_KEYS is required")
	case !c.Dev && (c.UserTokenSecret == "") == (c.UserTokenPublicKeyFile == ""):
		return errors.New("config: set exactly one of FLASHGATE_USER_TOKEN_SECRET and FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE")
	case c.Dev && (c.UserTokenSecret != "" || c.UserTokenPublicKeyFile != ""):
		return errors.New("config: dev mode checks user tokens with FLASHGATE_DEV_USER_TOKEN_SECRET only: unset the shop's FLASHGATE_USER_TOKEN_SECRET and FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE (or switch dev mode off)")
	case c.Dev && len(c.DevUserTokenSecret) < tokens.MinSecretLen:
		return fmt.Errorf("config: dev mode needs FLASHGATE_DEV_USER_TOKEN_SECRET of at least %d bytes, the same on the origins; %s", tokens.MinSecretLen, secretcheck.HowToMake)
	case c.DefaultRatePerSecond < 0 || c.DefaultRatePerSecond > 1e6:
		return errors.New("config: the default admission rate must be 0 to 1,000,000 a second")
	case c.JoinPipelines < 1 || c.JoinPipelines > maxJoinPipelines:
		return fmt.Errorf("config: join pipelines must be 1 to %d", maxJoinPipelines)
	case c.RedisSentinels != "" && c.RedisMasterName == "":
		return errors.New("config: FLASHGATE_REDIS_MASTER is required with FLASHGATE_REDIS_SENTINELS")
	case c.Tick <= 0 || c.SnapshotRefresh <= 0 || c.StaleAfter <= 0 || c.SnapshotStaleAfter <= 0 || c.AdmissionTokenTTL <= 0 ||
		c.OriginTimeout <= 0 || c.ShopTimeout <= 0 || c.ShutdownTimeout <= 0 || c.ReadTimeout <= 0:
		return errors.New("config: durations must be positive")
	case c.LineBlockWindow <= 0 || c.LineMinBlock < 1:
		return errors.New("config: the line block window and the line's smallest block must be positive")
	case c.AdmissionHoldAfter < 0:
		return errors.New("config: FLASHGATE_ADMISSION_HOLD_AFTER must be at least 0 (0: admission never holds for the checkout)")
	case c.StaleAfter < 2*c.Tick:
		return errors.New("config: stale-after must be at least two ticks")
	case c.SnapshotStaleAfter < 3*c.SnapshotRefresh:
		// One slow or failed refresh must not make a sale answer please_wait.
		return errors.New("config: snapshot-stale-after must be at least three snapshot refreshes")
	case c.MaxRequestHeadBytes < minRequestHeadBytes:
		return fmt.Errorf("config: the request head limit must be at least %d bytes", minRequestHeadBytes)
	case c.LimitMaxKeys < 1:
		return errors.New("config: the rate limits' key cap (FLASHGATE_LIMIT_MAX_KEYS) must be at least 1")
	case c.MaxHeldSnapshots < 1:
		return errors.New("config: the snapshot watches held at once (FLASHGATE_MAX_HELD_SNAPSHOTS) must be at least 1")
	case c.WebhookMaxBodyBytes < 1 || c.WebhookMaxBodyBytes > maxRequestBodyBytes:
		return fmt.Errorf("config: the webhook body bound (FLASHGATE_WEBHOOK_MAX_BODY_BYTES) must be 1 to %d bytes", maxRequestBodyBytes)
	case c.OriginMaxConns < 1 || c.OriginPaymentsMaxConns < 1 || c.ShopMaxConns < 1:
		return errors.New("config: connection pools must have at least one connection")
	case c.OriginQueueTimeout < 0 || c.OriginQueueTimeout >= c.OriginTimeout,
		c.OriginPaymentsQueueTimeout < 0 || c.OriginPaymentsQueueTimeout >= c.OriginTimeout:
		// Past the exchange's own timeout the wait would end as a timeout,
		// not as "the pool is full".
		return errors.New("config: the origin queue timeouts (FLASHGATE_ORIGIN_QUEUE_TIMEOUT, FLASHGATE_ORIGIN_PAYMENTS_QUEUE_TIMEOUT) must be at least 0 and shorter than the origin timeout")
	}
	if err := secretcheck.Strong(c.AdminToken); err != nil {
		return fmt.Errorf("config: the admin token (FLASHGATE_EDGE_ADMIN_TOKEN, -admin-token) is too weak: %w; %s", err, secretcheck.HowToMake)
	}
	if err := c.userTokens().Check(); err != nil {
		return err
	}
	if _, err := c.redis(); err != nil {
		return err
	}
	trusted, err := c.trustedProxies()
	if err != nil {
		return err
	}
	if wide := widePrefixes(trusted); len(wide) > 0 && !c.TrustedProxiesAllowWide {
		return fmt.Errorf("config: FLASHGATE_TRUSTED_PROXIES holds %s, wider than any CDN's or load balancer's own range: "+
			"every client inside it could name its own address to the rate limits and the webhook allow-list. "+
			"List your proxies' own ranges (outside private space at least /%d for IPv4, /%d for IPv6), "+
			"or set FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE=1 to accept it", strings.Join(wide, ", "), minPublicBits4, minPublicBits6)
	}
	if c.PublicHost != "" && !api.ValidHost(c.PublicHost) {
		return fmt.Errorf("config: FLASHGATE_PUBLIC_HOST %q is not a host (a name or address, with an optional port)", c.PublicHost)
	}
	if _, err := c.webhookAllow(); err != nil {
		return err
	}
	for _, r := range []struct{ name, rate string }{
		{"FLASHGATE_LIMIT_JOIN_IP", c.LimitJoinIP}, {"FLASHGATE_LIMIT_JOIN_SUBNET", c.LimitJoinSubnet}, {"FLASHGATE_LIMIT_JOIN_ACCOUNT", c.LimitJoinAccount},
		{"FLASHGATE_LIMIT_POLL_IP", c.LimitPollIP}, {"FLASHGATE_LIMIT_POLL_SUBNET", c.LimitPollSubnet}, {"FLASHGATE_LIMIT_POLL_ACCOUNT", c.LimitPollAccount},
		{"FLASHGATE_LIMIT_RESERVE_IP", c.LimitReserveIP}, {"FLASHGATE_LIMIT_RESERVE_ACCOUNT", c.LimitReserveAccount},
		{"FLASHGATE_LIMIT_ORDER_ACCOUNT", c.LimitOrderAccount}, {"FLASHGATE_LIMIT_ORDER_READ_ACCOUNT", c.LimitOrderReadAccount},
		{"FLASHGATE_LIMIT_WEBHOOK_IP", c.LimitWebhookIP},
	} {
		if r.rate == "" {
			continue // "" switches that limit off
		}
		if _, err := limiter.NewRateFromFormatted(r.rate); err != nil {
			return fmt.Errorf("config: %s: rate limit %q: %w", r.name, r.rate, err)
		}
	}
	return nil
}

// minRequestHeadBytes is fasthttp's own default read buffer: below it a
// browser's ordinary request would not fit.
const minRequestHeadBytes = 4 << 10

// maxJoinPipelines bounds FLASHGATE_JOIN_PIPELINES: each pipeline is a
// Redis connection kept busy, and past a round trip's worth of batches more
// only make smaller ones.
const maxJoinPipelines = 64

// maxRequestBodyBytes is the largest body any request may have (413
// beyond, before a handler sees it).
const maxRequestBodyBytes = 1 << 20

// redisPoolSize is the Redis pool of a node unless the URL sets pool_size.
const redisPoolSize = 64

// redis says how to reach Redis, checked.
func (c Config) redis() (redisconn.Options, error) {
	return redisconn.FromSettings(redisconn.Settings{URL: c.RedisURL, Sentinels: c.RedisSentinels,
		MasterName: c.RedisMasterName, SentinelPassword: c.RedisSentinelPassword, Cluster: c.RedisCluster}, redisPoolSize)
}

// trustedProxies are c's trusted proxy ranges, masked, an IPv4-mapped IPv6
// range as the IPv4 one it maps: client addresses are compared unmapped,
// so "::ffff:10.0.0.0/104" would otherwise match nothing.
func (c Config) trustedProxies() ([]netip.Prefix, error) {
	ps, err := prefixes(c.TrustedProxies, "trusted proxy")
	for i, p := range ps {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		ps[i] = p.Masked()
	}
	return ps, err
}

// The shortest trusted ranges of public space the edge accepts without
// FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE: the widest ranges CDNs publish for
// their egress are about this size (Cloudflare's 104.16.0.0/13 and
// 2a06:98c0::/29), and a proxy's range is never wider than its operator's.
const (
	minPublicBits4 = 12
	minPublicBits6 = 29
)

// privateSpace are the ranges no client reaches the edge from across the
// internet: a trusted range inside one may be as wide as it (10.0.0.0/8 for
// a load balancer's network, say).
var privateSpace = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space: carrier NAT, cluster networks
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("::1/128"),
}

// widePrefixes are the prefixes of ps that reach beyond private space and
// are shorter than minPublicBits4 or minPublicBits6 (0.0.0.0/0, ::/0,
// 2000::/3, a public /8), as strings.
func widePrefixes(ps []netip.Prefix) []string {
	var wide []string
	for _, p := range ps {
		if private(p) {
			continue
		}
		if (p.Addr().Is4() && p.Bits() < minPublicBits4) || (p.Addr().Is6() && p.Bits() < minPublicBits6) {
			wide = append(wide, p.String())
		}
	}
	return wide
}

// private reports whether p lies wholly inside privateSpace.
func private(p netip.Prefix) bool {
	for _, q := range privateSpace {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func (c Config) webhookAllow() ([]netip.Prefix, error) {
	return prefixes(c.WebhookAllow, "webhook allow-list entry")
}

// prefixes parses a comma-separated list of CIDRs; what names an entry in
// errors.
func prefixes(list, what string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range splitList(list) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("config: %s %q: %w", what, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// userTokens are c's user-token settings, as package usertokens checks them.
func (c Config) userTokens() usertokens.Settings {
	return usertokens.Settings{TokenKeys: c.TokenKeys, UserTokenSecret: c.UserTokenSecret, DevUserTokenSecret: c.DevUserTokenSecret,
		UserTokenIssuer: c.UserTokenIssuer, UserTokenAudience: c.UserTokenAudience, Dev: c.Dev}
}

// Warnings are what start-up logs at WARN about c: outside dev mode, user
// tokens whose iss or aud is not checked; wide trusted proxy ranges
// accepted with FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE.
func (c Config) Warnings() []string {
	w := c.userTokens().Warnings()
	trusted, _ := c.trustedProxies() // checked by Validate
	if wide := widePrefixes(trusted); len(wide) > 0 && c.TrustedProxiesAllowWide {
		w = append(w, "FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE: trusting X-Forwarded-For from "+strings.Join(wide, ", ")+
			": every client inside it can name its own address to the per-address and per-subnet rate limits and the webhook allow-list, "+
			"and its own X-Forwarded-Host and X-Forwarded-Proto to the shop")
	}
	return w
}
