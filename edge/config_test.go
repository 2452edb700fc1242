package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/internal/configtest"
)

// The Redis Sentinel settings come from their flags or environment
// variables, and bad ones are refused with a message naming the variable.
func TestLoadConfigRedisSentinels(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_EDGE_ADMIN_TOKEN":  configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":        "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM=",
		"FLASHGATE_USER_TOKEN_SECRET": "user-token-secret-0123456789",
	}
	for _, tc := range []struct {
		name                       string
		env                        map[string]string
		args                       []string
		sentinels, master, sentPwd string
		wantErr                    string // "" = no error; else a part of it
	}{
		{name: "no sentinels", master: "flashgate"},
		{name: "from env", env: map[string]string{
			"FLASHGATE_REDIS_SENTINELS": "10.0.0.1:26379,10.0.0.2:26379", "FLASHGATE_REDIS_MASTER": "shop",
			"FLASHGATE_REDIS_SENTINEL_PASSWORD": "spw"},
			sentinels: "10.0.0.1:26379,10.0.0.2:26379", master: "shop", sentPwd: "spw"},
		{name: "flag wins", env: map[string]string{"FLASHGATE_REDIS_SENTINELS": "a:1"},
			args: []string{"-redis-sentinels", "b:2", "-redis-master", "m"}, sentinels: "b:2", master: "m"},
		{name: "address without port", env: map[string]string{"FLASHGATE_REDIS_SENTINELS": "a:1,b"},
			wantErr: `FLASHGATE_REDIS_SENTINELS: sentinel address "b" is not host:port`},
		{name: "no master name", args: []string{"-redis-sentinels", "a:1", "-redis-master", ""},
			wantErr: "FLASHGATE_REDIS_MASTER is required"},
		{name: "bad url", env: map[string]string{"FLASHGATE_REDIS_URL": "redis://u:s3cret@host:nope/0"},
			wantErr: "redis url redis://xxxxx@host:nope/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return base[k]
			}
			c, _, err := loadConfig(tc.args, getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("loadConfig = %v, want an error with %q and no password", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig = %v", err)
			}
			if c.RedisSentinels != tc.sentinels || c.RedisMasterName != tc.master || c.RedisSentinelPassword != tc.sentPwd {
				t.Errorf("loadConfig: sentinels %q, master %q, password %q; want %q, %q, %q",
					c.RedisSentinels, c.RedisMasterName, c.RedisSentinelPassword, tc.sentinels, tc.master, tc.sentPwd)
			}
		})
	}
}

// devEnv is what dev mode needs, with FLASHGATE_DEV=dev ("" leaves it
// unset).
func devEnv(dev string) map[string]string {
	m := edgeConfig.DevEnv()
	m["FLASHGATE_DEV"] = dev
	return m
}

// A variable that does not parse stops the edge with a message naming it,
// rather than falling back to the default; booleans take 1, 0, true or
// false only; and a flag wins over its variable.
func TestLoadConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_EDGE_ADMIN_TOKEN":  configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":        "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM=",
		"FLASHGATE_USER_TOKEN_SECRET": "user-token-secret-0123456789",
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(app.Config) bool // for good values: the Config they give
		wantErr string                // "" = no error; else a part of it
	}{
		{name: "duration without a unit", env: map[string]string{"FLASHGATE_TICK": "100"},
			wantErr: `$FLASHGATE_TICK="100" is not a duration`},
		{name: "duration", env: map[string]string{"FLASHGATE_TICK": "50ms"},
			check: func(c app.Config) bool { return c.Tick == 50*time.Millisecond }},
		{name: "flag wins", env: map[string]string{"FLASHGATE_TICK": "50ms"}, args: []string{"-tick", "70ms"},
			check: func(c app.Config) bool { return c.Tick == 70*time.Millisecond }},
		{name: "a bad variable is refused even under its flag", env: map[string]string{"FLASHGATE_TICK": "soon"}, args: []string{"-tick", "70ms"},
			wantErr: `$FLASHGATE_TICK="soon" is not a duration`},
		{name: "whole number", env: map[string]string{"FLASHGATE_ORIGIN_MAX_CONNS": "many"},
			wantErr: `$FLASHGATE_ORIGIN_MAX_CONNS="many" is not a whole number`},
		{name: "whole number with a fraction", env: map[string]string{"FLASHGATE_MAX_REQUEST_HEAD_BYTES": "16.5"},
			wantErr: `$FLASHGATE_MAX_REQUEST_HEAD_BYTES="16.5" is not a whole number`},
		{name: "number", env: map[string]string{"FLASHGATE_DEFAULT_RATE": "fast"},
			wantErr: `$FLASHGATE_DEFAULT_RATE="fast" is not a number`},
		{name: "join pipelines", env: map[string]string{"FLASHGATE_JOIN_PIPELINES": "8"},
			check: func(c app.Config) bool { return c.JoinPipelines == 8 }},
		{name: "join pipelines default", check: func(c app.Config) bool { return c.JoinPipelines == 2 }},
		{name: "queue timeouts by default", check: func(c app.Config) bool {
			return c.OriginQueueTimeout == time.Second && c.OriginPaymentsQueueTimeout == 3*time.Second
		}},
		{name: "payments queue timeout", env: map[string]string{"FLASHGATE_ORIGIN_PAYMENTS_QUEUE_TIMEOUT": "2s"},
			check: func(c app.Config) bool {
				return c.OriginPaymentsQueueTimeout == 2*time.Second && c.OriginQueueTimeout == time.Second
			}},
		{name: "payments queue timeout past the origin timeout", env: map[string]string{"FLASHGATE_ORIGIN_PAYMENTS_QUEUE_TIMEOUT": "5s"},
			wantErr: "must be at least 0 and shorter than the origin timeout"},
		{name: "admission hold by default", check: func(c app.Config) bool { return c.AdmissionHoldAfter == 250*time.Millisecond }},
		{name: "admission hold off", env: map[string]string{"FLASHGATE_ADMISSION_HOLD_AFTER": "0"},
			check: func(c app.Config) bool { return c.AdmissionHoldAfter == 0 }},
		{name: "negative admission hold", env: map[string]string{"FLASHGATE_ADMISSION_HOLD_AFTER": "-1s"},
			wantErr: "FLASHGATE_ADMISSION_HOLD_AFTER must be at least 0"},
		{name: "no join pipeline", env: map[string]string{"FLASHGATE_JOIN_PIPELINES": "0"}, wantErr: "join pipelines must be 1 to 64"},
		{name: "too many join pipelines", env: map[string]string{"FLASHGATE_JOIN_PIPELINES": "65"}, wantErr: "join pipelines must be 1 to 64"},
		{name: "fractional rate", env: map[string]string{"FLASHGATE_DEFAULT_RATE": "0.5"},
			check: func(c app.Config) bool { return c.DefaultRatePerSecond == 0.5 }},
		{name: "dev yes", env: map[string]string{"FLASHGATE_DEV": "yes"},
			wantErr: `$FLASHGATE_DEV="yes" is not 1, 0, true or false`},
		{name: "dev TRUE", env: map[string]string{"FLASHGATE_DEV": "TRUE"},
			wantErr: `$FLASHGATE_DEV="TRUE" is not 1, 0, true or false`},
		{name: "dev 1", env: devEnv("1"), check: func(c app.Config) bool { return c.Dev }},
		{name: "dev true", env: devEnv("true"), check: func(c app.Config) bool { return c.Dev }},
		{name: "dev 0", env: map[string]string{"FLASHGATE_DEV": "0"}, check: func(c app.Config) bool { return !c.Dev }},
		{name: "dev unset", check: func(c app.Config) bool { return !c.Dev }},
		{name: "-dev", env: devEnv(""), args: []string{"-dev"}, check: func(c app.Config) bool { return c.Dev }},
		{name: "-dev=false over the variable", env: map[string]string{"FLASHGATE_DEV": "1"}, args: []string{"-dev=false"},
			check: func(c app.Config) bool { return !c.Dev }},
		{name: "-dev=yes", args: []string{"-dev=yes"}, wantErr: `invalid boolean value "yes" for -dev`},
		{name: "head limit below 4 KiB", env: map[string]string{"FLASHGATE_MAX_REQUEST_HEAD_BYTES": "1024"},
			wantErr: "the request head limit must be at least 4096 bytes"},
		{name: "payment limits", env: map[string]string{"FLASHGATE_LIMIT_ORDER_ACCOUNT": "5-M", "FLASHGATE_LIMIT_ORDER_READ_ACCOUNT": "2-S",
			"FLASHGATE_LIMIT_MAX_KEYS": "5000"},
			check: func(c app.Config) bool {
				return c.LimitOrderAccount == "5-M" && c.LimitOrderReadAccount == "2-S" && c.LimitWebhookIP == "1000-S" && c.LimitMaxKeys == 5000
			}},
		{name: "payment limits off by flag", args: []string{"-limit-order-account=", "-limit-webhook-ip="},
			check: func(c app.Config) bool {
				return c.LimitOrderAccount == "" && c.LimitWebhookIP == "" && c.LimitOrderReadAccount == "120-M"
			}},
		{name: "bad order limit", env: map[string]string{"FLASHGATE_LIMIT_ORDER_ACCOUNT": "5 a minute"},
			wantErr: `rate limit "5 a minute"`},
		{name: "bad webhook limit", env: map[string]string{"FLASHGATE_LIMIT_WEBHOOK_IP": "fast"},
			wantErr: `rate limit "fast"`},
		{name: "subnet limits by default", check: func(c app.Config) bool {
			return c.LimitJoinSubnet == "1200-M" && c.LimitPollSubnet == "300-S"
		}},
		{name: "subnet limits", env: map[string]string{"FLASHGATE_LIMIT_JOIN_SUBNET": "500-M", "FLASHGATE_LIMIT_POLL_SUBNET": "100-S"},
			check: func(c app.Config) bool { return c.LimitJoinSubnet == "500-M" && c.LimitPollSubnet == "100-S" }},
		{name: "subnet limits by flag", env: map[string]string{"FLASHGATE_LIMIT_JOIN_SUBNET": "500-M"}, args: []string{"-limit-join-subnet", "50-M", "-limit-poll-subnet", "5-S"},
			check: func(c app.Config) bool { return c.LimitJoinSubnet == "50-M" && c.LimitPollSubnet == "5-S" }},
		{name: "subnet limits off by flag", args: []string{"-limit-join-subnet=", "-limit-poll-subnet="},
			check: func(c app.Config) bool {
				return c.LimitJoinSubnet == "" && c.LimitPollSubnet == "" && c.LimitJoinIP == "120-M" && c.LimitPollIP == "30-S"
			}},
		{name: "bad join subnet limit", env: map[string]string{"FLASHGATE_LIMIT_JOIN_SUBNET": "1200 a minute"},
			wantErr: `FLASHGATE_LIMIT_JOIN_SUBNET: rate limit "1200 a minute"`},
		{name: "bad poll subnet limit", env: map[string]string{"FLASHGATE_LIMIT_POLL_SUBNET": "300/s"},
			wantErr: `FLASHGATE_LIMIT_POLL_SUBNET: rate limit "300/s"`},
		{name: "bad poll subnet limit by flag", args: []string{"-limit-poll-subnet", "/24"},
			wantErr: `FLASHGATE_LIMIT_POLL_SUBNET: rate limit "/24"`},
		{name: "no limit keys", env: map[string]string{"FLASHGATE_LIMIT_MAX_KEYS": "0"},
			wantErr: "FLASHGATE_LIMIT_MAX_KEYS"},
		{name: "webhook allow-list", env: map[string]string{"FLASHGATE_WEBHOOK_ALLOW": "203.0.113.0/24, 2001:db8::/48"},
			check: func(c app.Config) bool { return c.WebhookAllow == "203.0.113.0/24, 2001:db8::/48" }},
		{name: "webhook allow-list of a bare address", env: map[string]string{"FLASHGATE_WEBHOOK_ALLOW": "203.0.113.7"},
			wantErr: `webhook allow-list entry "203.0.113.7"`},
		{name: "webhook body bound", env: map[string]string{"FLASHGATE_WEBHOOK_MAX_BODY_BYTES": "8192"},
			check: func(c app.Config) bool { return c.WebhookMaxBodyBytes == 8192 }},
		{name: "webhook body bound default", check: func(c app.Config) bool { return c.WebhookMaxBodyBytes == 64<<10 }},
		{name: "webhook body bound beyond the server's", env: map[string]string{"FLASHGATE_WEBHOOK_MAX_BODY_BYTES": "2000000"},
			wantErr: "FLASHGATE_WEBHOOK_MAX_BODY_BYTES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return base[k]
			}
			c, _, err := loadConfig(tc.args, getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("loadConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig = %v, want no error", err)
			}
			if !tc.check(c) {
				t.Errorf("loadConfig did not give what %s should give", tc.name)
			}
		})
	}
}

// TestLoadConfigTrustedProxies: a trusted proxy range that reaches beyond
// private space must be no wider than a CDN's own (/12 for IPv4, /29 for
// IPv6): a wider one (the internet, a public /8) is refused at start,
// naming the override, unless FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE is set,
// and then it is warned of at every start. FLASHGATE_PUBLIC_HOST must be a
// host.
func TestLoadConfigTrustedProxies(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_EDGE_ADMIN_TOKEN":    configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":          "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM=",
		"FLASHGATE_USER_TOKEN_SECRET":   "user-token-secret-0123456789",
		"FLASHGATE_USER_TOKEN_ISSUER":   "https://id.shop.example",
		"FLASHGATE_USER_TOKEN_AUDIENCE": "flashgate",
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantErr  string // "" = no error; else a part of it
		wantWarn string // "" = no warning; else a part of the one
	}{
		{name: "none", env: nil},
		{name: "one address", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "127.0.0.1/32"}},
		{name: "private networks", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "10.0.0.0/8, 172.16.0.0/12, 100.64.0.0/10, fc00::/7"}},
		{name: "a CDN's published ranges", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "104.16.0.0/13, 162.158.0.0/15, 2400:cb00::/32, 2a06:98c0::/29"}},
		{name: "a bare address", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "10.0.1.5"}, wantErr: `trusted proxy "10.0.1.5"`},
		{name: "the IPv4 internet", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "10.0.0.0/8, 0.0.0.0/0"},
			wantErr: "FLASHGATE_TRUSTED_PROXIES holds 0.0.0.0/0"},
		{name: "the IPv6 internet", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "::/0"}, wantErr: "FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE=1"},
		{name: "global unicast", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "2000::/3"}, wantErr: "2000::/3"},
		{name: "half the internet", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "128.0.0.0/1"}, wantErr: "128.0.0.0/1"},
		{name: "a public /8", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "8.0.0.0/8"}, wantErr: "8.0.0.0/8"},
		{name: "a public /11", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "104.0.0.0/11"}, wantErr: "104.0.0.0/11"},
		{name: "a public /28 of IPv6", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "2a06:98c0::/28"}, wantErr: "2a06:98c0::/28"},
		{name: "private and then some", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "10.0.0.0/7"}, wantErr: "10.0.0.0/7"},
		{name: "the IPv4 internet, mapped", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "::ffff:0.0.0.0/96"}, wantErr: "0.0.0.0/0"},
		{name: "wide, allowed", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "10.0.0.0/8, 0.0.0.0/0", "FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE": "1"},
			wantWarn: "FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE: trusting X-Forwarded-For from 0.0.0.0/0"},
		{name: "allowed, nothing wide", env: map[string]string{"FLASHGATE_TRUSTED_PROXIES": "10.0.0.0/8", "FLASHGATE_TRUSTED_PROXIES_ALLOW_WIDE": "1"}},
		{name: "public host", env: map[string]string{"FLASHGATE_PUBLIC_HOST": "sale.shop.example:8443"}},
		{name: "public host with a path", env: map[string]string{"FLASHGATE_PUBLIC_HOST": "sale.shop.example/login"},
			wantErr: `FLASHGATE_PUBLIC_HOST "sale.shop.example/login" is not a host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return base[k]
			}
			_, warnings, err := loadConfig(nil, getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("loadConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig = %v, want no error", err)
			}
			switch {
			case tc.wantWarn == "" && len(warnings) != 0:
				t.Errorf("loadConfig warned %q, want no warning", warnings)
			case tc.wantWarn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.wantWarn)):
				t.Errorf("loadConfig warned %q, want one warning with %q", warnings, tc.wantWarn)
			}
		})
	}
}

// edgeConfig is the edge under the configuration suite both binaries pass.
var edgeConfig = configtest.Binary[app.Config]{
	Tier: "EDGE",
	Env: map[string]string{
		"FLASHGATE_EDGE_ADMIN_TOKEN":        configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":              "k1:dG9rZW4ta2V5LXNlY3JldC1tYXJrZXItMDEyMzQ1Njc4OQ==",
		"FLASHGATE_USER_TOKEN_SECRET":       "shop-user-token-secret-marker-0123456789",
		"FLASHGATE_DEV_USER_TOKEN_SECRET":   "dev-user-token-secret-marker-0123456789",
		"FLASHGATE_REDIS_URL":               "redis://u:redis-password-marker@127.0.0.1:6379/0",
		"FLASHGATE_REDIS_SENTINEL_PASSWORD": "sentinel-password-marker",
		"FLASHGATE_USER_TOKEN_ISSUER":       "https://id.shop.example",
		"FLASHGATE_USER_TOKEN_AUDIENCE":     "flashgate",
	},
	Secrets: []string{configtest.AdminToken, "dG9rZW4ta2V5LXNlY3JldC1tYXJrZXItMDEyMzQ1Njc4OQ", "shop-user-token-secret-marker",
		"dev-user-token-secret-marker", "redis-password-marker", "sentinel-password-marker"},
	Fields: map[string]func(app.Config) string{
		"FLASHGATE_EDGE_ADMIN_TOKEN":        func(c app.Config) string { return c.AdminToken },
		"FLASHGATE_ADMIN_TOKEN":             func(c app.Config) string { return c.AdminToken },
		"FLASHGATE_TOKEN_KEYS":              func(c app.Config) string { return c.TokenKeys },
		"FLASHGATE_USER_TOKEN_SECRET":       func(c app.Config) string { return c.UserTokenSecret },
		"FLASHGATE_DEV_USER_TOKEN_SECRET":   func(c app.Config) string { return c.DevUserTokenSecret },
		"FLASHGATE_REDIS_URL":               func(c app.Config) string { return c.RedisURL },
		"FLASHGATE_REDIS_SENTINEL_PASSWORD": func(c app.Config) string { return c.RedisSentinelPassword },
	},
	Load: loadConfig, Run: run,
	Listeners:   func(c app.Config) (string, string, bool) { return c.Addr, c.AdminAddr, c.Dev },
	DefaultAddr: ":8080", DefaultAdminAddr: "127.0.0.1:8081",
}

func TestSecretsAreNeverPrinted(t *testing.T) { t.Parallel(); edgeConfig.SecretsAreNeverPrinted(t) }
func TestSecretFiles(t *testing.T)            { t.Parallel(); edgeConfig.SecretFiles(t) }
func TestAdminTokens(t *testing.T)            { t.Parallel(); edgeConfig.AdminTokens(t) }
func TestListenersAndDevMode(t *testing.T)    { t.Parallel(); edgeConfig.ListenersAndDevMode(t) }
func TestUserTokens(t *testing.T)             { t.Parallel(); edgeConfig.UserTokens(t) }
