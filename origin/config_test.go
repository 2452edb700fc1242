package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/configtest"
	"github.com/flashgate/flashgate/origin/internal/app"
)

// The Redis Sentinel settings come from their flags or environment
// variables, and bad ones are refused with a message naming the variable.
func TestLoadConfigRedisSentinels(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_ORIGIN_ADMIN_TOKEN": configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":         "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM=",
		"FLASHGATE_USER_TOKEN_SECRET":  "user-token-secret-0123456789",
		"FLASHGATE_LINE_AUDIENCE":      "production",
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
			wantErr: "FLASHGATE_REDIS_MASTER (-redis-master) is required"},
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
	m := originConfig.DevEnv()
	m["FLASHGATE_DEV"] = dev
	return m
}

// A variable that does not parse stops the origin with a message naming
// it, rather than falling back to the default; booleans take 1, 0, true or
// false only; and a flag wins over its variable.
func TestLoadConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_ORIGIN_ADMIN_TOKEN": configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":         "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM=",
		"FLASHGATE_USER_TOKEN_SECRET":  "user-token-secret-0123456789",
		"FLASHGATE_LINE_AUDIENCE":      "production",
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(app.Config) bool // for good values: the Config they give
		wantErr string                // "" = no error; else a part of it
	}{
		{name: "duration without a unit", env: map[string]string{"FLASHGATE_SWEEP_INTERVAL": "200"},
			wantErr: `$FLASHGATE_SWEEP_INTERVAL="200" is not a duration`},
		{name: "duration", env: map[string]string{"FLASHGATE_SWEEP_INTERVAL": "1s"},
			check: func(c app.Config) bool { return c.SweepInterval == time.Second }},
		{name: "flag wins", env: map[string]string{"FLASHGATE_REQUEST_BUDGET": "1s"}, args: []string{"-request-budget", "2s"},
			check: func(c app.Config) bool { return c.RequestBudget == 2*time.Second }},
		{name: "bad whole number", env: map[string]string{"FLASHGATE_WRITER_BATCH": "1k"},
			wantErr: `$FLASHGATE_WRITER_BATCH="1k" is not a whole number`},
		{name: "good whole number", env: map[string]string{"FLASHGATE_WRITER_BATCH": "250"},
			check: func(c app.Config) bool { return c.WriterBatch == 250 }},
		{name: "dev yes", env: map[string]string{"FLASHGATE_DEV": "yes"},
			wantErr: `$FLASHGATE_DEV="yes" is not 1, 0, true or false`},
		{name: "dev true", env: devEnv("true"), check: func(c app.Config) bool { return c.Dev }},
		{name: "dev unset", check: func(c app.Config) bool { return !c.Dev }},
		{name: "journal off", env: map[string]string{"FLASHGATE_RESERVE_JOURNAL": "off"},
			wantErr: `$FLASHGATE_RESERVE_JOURNAL="off" is not 1, 0, true or false`},
		{name: "journal 0", env: map[string]string{"FLASHGATE_RESERVE_JOURNAL": "0"},
			check: func(c app.Config) bool { return !c.ReserveJournal }},
		{name: "journal on by default", check: func(c app.Config) bool { return c.ReserveJournal }},
		{name: "-reserve-journal=false", args: []string{"-reserve-journal=false"},
			check: func(c app.Config) bool { return !c.ReserveJournal }},
		{name: "read timeout", env: map[string]string{"FLASHGATE_READ_TIMEOUT": "2s"},
			check: func(c app.Config) bool { return c.ReadTimeout == 2*time.Second }},
		{name: "writer poll", env: map[string]string{"FLASHGATE_WRITER_POLL": "250ms"},
			check: func(c app.Config) bool { return c.WriterPoll == 250*time.Millisecond }},
		{name: "writer poll past a quarter of the claim idle", env: map[string]string{"FLASHGATE_WRITER_POLL": "3s", "FLASHGATE_WRITER_CLAIM_IDLE": "10s"},
			wantErr: "FLASHGATE_WRITER_POLL must be at most a quarter of FLASHGATE_WRITER_CLAIM_IDLE"},

		{name: "payments off by default, sandbox", check: func(c app.Config) bool { return c.PaymentProvider == "sandbox" && !c.PaymentsOn() }},
		{name: "unknown payment provider", env: map[string]string{"FLASHGATE_PAYMENT_PROVIDER": "paypal"},
			wantErr: `FLASHGATE_PAYMENT_PROVIDER "paypal": want sandbox, stripe or razorpay`},
		{name: "sandbox without its webhook secret", env: map[string]string{"FLASHGATE_GATEWAY_API_KEY": "sk_sandbox"},
			wantErr: "FLASHGATE_GATEWAY_WEBHOOK_SECRET must name"},
		{name: "stripe", env: map[string]string{"FLASHGATE_PAYMENT_PROVIDER": "stripe", "FLASHGATE_STRIPE_SECRET_KEY": "sk_test_1",
			"FLASHGATE_STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdef"},
			check: func(c app.Config) bool { return c.PaymentsOn() && c.StripeWebhookSecrets == "whsec_0123456789abcdef" }},
		{name: "stripe's key does not switch the sandbox on", env: map[string]string{"FLASHGATE_STRIPE_SECRET_KEY": "sk_test_1"},
			check: func(c app.Config) bool { return !c.PaymentsOn() }},
		{name: "stripe without its webhook secret", env: map[string]string{"FLASHGATE_PAYMENT_PROVIDER": "stripe", "FLASHGATE_STRIPE_SECRET_KEY": "sk_test_1"},
			wantErr: "FLASHGATE_STRIPE_WEBHOOK_SECRET must name"},
		{name: "razorpay without its key secret", env: map[string]string{"FLASHGATE_PAYMENT_PROVIDER": "razorpay", "FLASHGATE_RAZORPAY_KEY_ID": "rzp_test_1",
			"FLASHGATE_RAZORPAY_WEBHOOK_SECRET": "0123456789abcdef"},
			wantErr: "set both FLASHGATE_RAZORPAY_KEY_ID and FLASHGATE_RAZORPAY_KEY_SECRET"},
		{name: "razorpay", env: map[string]string{"FLASHGATE_PAYMENT_PROVIDER": "razorpay", "FLASHGATE_RAZORPAY_KEY_ID": "rzp_test_1",
			"FLASHGATE_RAZORPAY_KEY_SECRET": "secret", "FLASHGATE_RAZORPAY_WEBHOOK_SECRET": "0123456789abcdef"},
			check: func(c app.Config) bool { return c.PaymentsOn() && c.RazorpayKeyID == "rzp_test_1" }},
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

// originConfig is the origin under the configuration suite both binaries pass.
var originConfig = configtest.Binary[app.Config]{
	Tier: "ORIGIN",
	Env: map[string]string{
		"FLASHGATE_ORIGIN_ADMIN_TOKEN":      configtest.AdminToken,
		"FLASHGATE_TOKEN_KEYS":              "k1:dG9rZW4ta2V5LXNlY3JldC1tYXJrZXItMDEyMzQ1Njc4OQ==",
		"FLASHGATE_USER_TOKEN_SECRET":       "shop-user-token-secret-marker-0123456789",
		"FLASHGATE_DEV_USER_TOKEN_SECRET":   "dev-user-token-secret-marker-0123456789",
		"FLASHGATE_REDIS_URL":               "redis://u:redis-password-marker@127.0.0.1:6379/0",
		"FLASHGATE_REDIS_SENTINEL_PASSWORD": "sentinel-password-marker",
		"FLASHGATE_USER_TOKEN_ISSUER":       "https://id.shop.example",
		"FLASHGATE_USER_TOKEN_AUDIENCE":     "flashgate",
		"FLASHGATE_POSTGRES_URL":            "postgres://u:postgres-password-marker@127.0.0.1:5432/db",
		"FLASHGATE_GATEWAY_API_KEY":         "gateway-api-key-marker",
		"FLASHGATE_GATEWAY_WEBHOOK_SECRET":  "webhook-secret-marker-0123456789",
		"FLASHGATE_STRIPE_SECRET_KEY":       "sk_test_stripe-key-marker",
		"FLASHGATE_STRIPE_WEBHOOK_SECRET":   "whsec_stripe-webhook-marker-0123",
		"FLASHGATE_RAZORPAY_KEY_SECRET":     "razorpay-key-secret-marker",
		"FLASHGATE_RAZORPAY_WEBHOOK_SECRET": "razorpay-webhook-marker-0123456",
		"FLASHGATE_LINE_AUDIENCE":           "production",
	},
	Secrets: []string{configtest.AdminToken, "dG9rZW4ta2V5LXNlY3JldC1tYXJrZXItMDEyMzQ1Njc4OQ", "shop-user-token-secret-marker",
		"dev-user-token-secret-marker", "redis-password-marker", "sentinel-password-marker", "postgres-password-marker",
		"gateway-api-key-marker", "webhook-secret-marker", "stripe-key-marker", "stripe-webhook-marker",
		"razorpay-key-secret-marker", "razorpay-webhook-marker"},
	Fields: map[string]func(app.Config) string{
		"FLASHGATE_ORIGIN_ADMIN_TOKEN":      func(c app.Config) string { return c.AdminToken },
		"FLASHGATE_ADMIN_TOKEN":             func(c app.Config) string { return c.AdminToken },
		"FLASHGATE_TOKEN_KEYS":              func(c app.Config) string { return c.TokenKeys },
		"FLASHGATE_USER_TOKEN_SECRET":       func(c app.Config) string { return c.UserTokenSecret },
		"FLASHGATE_DEV_USER_TOKEN_SECRET":   func(c app.Config) string { return c.DevUserTokenSecret },
		"FLASHGATE_REDIS_URL":               func(c app.Config) string { return c.RedisURL },
		"FLASHGATE_REDIS_SENTINEL_PASSWORD": func(c app.Config) string { return c.RedisSentinelPassword },
		"FLASHGATE_POSTGRES_URL":            func(c app.Config) string { return c.PostgresURL },
		"FLASHGATE_GATEWAY_API_KEY":         func(c app.Config) string { return c.GatewayAPIKey },
		"FLASHGATE_GATEWAY_WEBHOOK_SECRET":  func(c app.Config) string { return c.WebhookSecrets },
		"FLASHGATE_STRIPE_SECRET_KEY":       func(c app.Config) string { return c.StripeSecretKey },
		"FLASHGATE_STRIPE_WEBHOOK_SECRET":   func(c app.Config) string { return c.StripeWebhookSecrets },
		"FLASHGATE_RAZORPAY_KEY_SECRET":     func(c app.Config) string { return c.RazorpayKeySecret },
		"FLASHGATE_RAZORPAY_WEBHOOK_SECRET": func(c app.Config) string { return c.RazorpayWebhookSecrets },
	},
	Load: loadConfig, Run: run,
	Listeners:   func(c app.Config) (string, string, bool) { return c.Addr, c.AdminAddr, c.Dev },
	DefaultAddr: ":9090", DefaultAdminAddr: "127.0.0.1:9091",
}

func TestSecretsAreNeverPrinted(t *testing.T) { t.Parallel(); originConfig.SecretsAreNeverPrinted(t) }
func TestSecretFiles(t *testing.T)            { t.Parallel(); originConfig.SecretFiles(t) }
func TestAdminTokens(t *testing.T)            { t.Parallel(); originConfig.AdminTokens(t) }
func TestListenersAndDevMode(t *testing.T)    { t.Parallel(); originConfig.ListenersAndDevMode(t) }
func TestUserTokens(t *testing.T)             { t.Parallel(); originConfig.UserTokens(t) }
