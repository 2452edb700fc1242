package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/origin/internal/app"
)

// The Redis Sentinel settings come from their flags or environment
// variables, and bad ones are refused with a message naming the variable.
func TestLoadConfigRedisSentinels(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_ORIGIN_ADMIN_TOKEN": testAdminToken,
		"FLASHGATE_TOKEN_KEYS":         "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAx",
		"FLASHGATE_USER_TOKEN_SECRET":  "user-token-secret-0123456789",
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

// devEnv is what dev mode needs besides FLASHGATE_DEV=dev: its own
// user-token secret, not the shop's, and loopback listeners.
func devEnv(dev string) map[string]string {
	return map[string]string{"FLASHGATE_DEV": dev, "FLASHGATE_USER_TOKEN_SECRET": "",
		"FLASHGATE_DEV_USER_TOKEN_SECRET": "dev-user-token-secret-0123456789abcdef", "FLASHGATE_ORIGIN_ADDR": "127.0.0.1:9090"}
}

// A variable that does not parse stops the origin with a message naming
// it, rather than falling back to the default; booleans take 1, 0, true or
// false only; and a flag wins over its variable.
func TestLoadConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"FLASHGATE_ORIGIN_ADMIN_TOKEN": testAdminToken,
		"FLASHGATE_TOKEN_KEYS":         "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAx",
		"FLASHGATE_USER_TOKEN_SECRET":  "user-token-secret-0123456789",
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

// testAdminToken is a strong admin token: 32 random bytes in base64.
const testAdminToken = "j+oVUiXKdsPorCFgHdC4M+CZ+HJQIAhw9377Zl3vnE0="

// secretEnv is a valid configuration in which every secret is set, each to
// a value no output may show.
var secretEnv = map[string]string{
	"FLASHGATE_ORIGIN_ADMIN_TOKEN":      testAdminToken,
	"FLASHGATE_TOKEN_KEYS":              "k1:dG9rZW4ta2V5LXNlY3JldC1tYXJrZXItMDEyMzQ1Njc4OQ==",
	"FLASHGATE_USER_TOKEN_SECRET":       "shop-user-token-secret-marker-0123456789",
	"FLASHGATE_DEV_USER_TOKEN_SECRET":   "dev-user-token-secret-marker-0123456789",
	"FLASHGATE_REDIS_URL":               "redis://u:redis-password-marker@127.0.0.1:6379/0",
	"FLASHGATE_REDIS_SENTINEL_PASSWORD": "sentinel-password-marker",
	"FLASHGATE_POSTGRES_URL":            "postgres://u:postgres-password-marker@127.0.0.1:5432/db",
	"FLASHGATE_GATEWAY_API_KEY":         "gateway-api-key-marker",
	"FLASHGATE_GATEWAY_WEBHOOK_SECRET":  "webhook-secret-marker-0123456789",
}

// secretValues are the values of secretEnv that must never be printed.
func secretValues() []string {
	return []string{testAdminToken, "dG9rZW4ta2V5LXNlY3JldC1tYXJrZXItMDEyMzQ1Njc4OQ", "shop-user-token-secret-marker",
		"dev-user-token-secret-marker", "redis-password-marker", "sentinel-password-marker", "postgres-password-marker",
		"gateway-api-key-marker", "webhook-secret-marker"}
}

// envWith is secretEnv with changes; "" unsets a variable.
func envWith(changes map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := changes[k]; ok {
			return v
		}
		return secretEnv[k]
	}
}

// Neither -h, nor a mistyped flag or value, nor a variable or setting that
// is refused prints a secret, whether it came from a variable or a file.
func TestSecretsAreNeverPrinted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fromFiles := map[string]string{}
	for k, v := range secretEnv {
		path := filepath.Join(dir, k)
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fromFiles[k], fromFiles[k+"_FILE"] = "", path
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{name: "-h", args: []string{"-h"}},
		{name: "-help from files", env: fromFiles, args: []string{"-help"}},
		{name: "unknown flag", args: []string{"-nope"}},
		{name: "unknown flag, from files", env: fromFiles, args: []string{"-nope"}},
		{name: "flag without its value", args: []string{"-webhook-secret"}},
		{name: "bad flag value", args: []string{"-sweep-interval", "soon"}},
		{name: "bad variable", env: map[string]string{"FLASHGATE_SWEEP_INTERVAL": "soon"}},
		{name: "refused setting", args: []string{"-dev"}},
		{name: "refused setting, from files", env: fromFiles, args: []string{"-dev"}},
		{name: "start-up fails at Redis", env: map[string]string{"FLASHGATE_REDIS_URL": "redis://u:redis-password-marker@127.0.0.1:1/0"}},
		{name: "bad Redis URL", env: map[string]string{"FLASHGATE_REDIS_URL": "redis://u:redis-password-marker@127.0.0.1:nope/0"}},
		{name: "Redis password with a '#'", env: map[string]string{"FLASHGATE_REDIS_URL": "redis://u:redis-password-marker#x@127.0.0.1:6379/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := run(context.Background(), tc.args, envWith(tc.env), &stdout, &stderr)
			if err == nil && !strings.HasPrefix(tc.name, "-h") {
				t.Errorf("run(%q) = nil, want an error", tc.args)
			}
			printed := stdout.String() + stderr.String() + fmt.Sprint(err)
			for _, secret := range secretValues() {
				if strings.Contains(printed, secret) {
					t.Errorf("run(%q) printed the secret %q:\n%s", tc.args, secret, printed)
				}
			}
		})
	}
}

// Every secret can come from a file instead of its variable (one trailing
// newline dropped), and setting both is refused.
func TestSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		env string
		get func(app.Config) string
	}{
		{"FLASHGATE_ORIGIN_ADMIN_TOKEN", func(c app.Config) string { return c.AdminToken }},
		{"FLASHGATE_ADMIN_TOKEN", func(c app.Config) string { return c.AdminToken }},
		{"FLASHGATE_TOKEN_KEYS", func(c app.Config) string { return c.TokenKeys }},
		{"FLASHGATE_USER_TOKEN_SECRET", func(c app.Config) string { return c.UserTokenSecret }},
		{"FLASHGATE_DEV_USER_TOKEN_SECRET", func(c app.Config) string { return c.DevUserTokenSecret }},
		{"FLASHGATE_REDIS_URL", func(c app.Config) string { return c.RedisURL }},
		{"FLASHGATE_REDIS_SENTINEL_PASSWORD", func(c app.Config) string { return c.RedisSentinelPassword }},
		{"FLASHGATE_POSTGRES_URL", func(c app.Config) string { return c.PostgresURL }},
		{"FLASHGATE_GATEWAY_API_KEY", func(c app.Config) string { return c.GatewayAPIKey }},
		{"FLASHGATE_GATEWAY_WEBHOOK_SECRET", func(c app.Config) string { return c.WebhookSecrets }},
	} {
		t.Run(tc.env, func(t *testing.T) {
			want := secretEnv[tc.env]
			changes := map[string]string{tc.env: ""}
			if tc.env == "FLASHGATE_ADMIN_TOKEN" { // the fallback of the origin's own
				want, changes["FLASHGATE_ORIGIN_ADMIN_TOKEN"] = testAdminToken, ""
			}
			path := filepath.Join(dir, tc.env)
			if err := os.WriteFile(path, []byte(want+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			changes[tc.env+"_FILE"] = path
			c, _, err := loadConfig(nil, envWith(changes), io.Discard)
			if err != nil || tc.get(c) != want {
				t.Errorf("loadConfig with $%s_FILE = %v; the setting is %s, want the file's content", tc.env, err,
					map[bool]string{true: "the file's content", false: "something else"}[err == nil && tc.get(c) == want])
			}
			changes[tc.env] = want
			if _, _, err := loadConfig(nil, envWith(changes), io.Discard); err == nil || !strings.Contains(err.Error(), "set $"+tc.env+" or $"+tc.env+"_FILE, not both") {
				t.Errorf("loadConfig with $%s and $%s_FILE = %v, want an error naming both", tc.env, tc.env, err)
			}
		})
	}
}

// The origin has an admin token of its own, strong; the shared
// FLASHGATE_ADMIN_TOKEN still works, with a warning.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	other := "ISvBaq64UAgPI1ccurwGHv3uyHTtnH7ZDlXgQQ4xoMs="
	for _, tc := range []struct {
		name        string
		env         map[string]string
		want        string
		wantWarning string // a part of the one warning; "" = none
		wantErr     string
	}{
		{name: "the origin's own", want: testAdminToken},
		{name: "the shared one", env: map[string]string{"FLASHGATE_ORIGIN_ADMIN_TOKEN": "", "FLASHGATE_ADMIN_TOKEN": other},
			want: other, wantWarning: "one admin token (FLASHGATE_ADMIN_TOKEN) serves the origins and the edges"},
		{name: "the origin's own wins", env: map[string]string{"FLASHGATE_ADMIN_TOKEN": other}, want: testAdminToken},
		{name: "none", env: map[string]string{"FLASHGATE_ORIGIN_ADMIN_TOKEN": ""},
			wantErr: "FLASHGATE_ORIGIN_ADMIN_TOKEN (-admin-token) is required; make one with `openssl rand -base64 32`"},
		{name: "16 of one letter", env: map[string]string{"FLASHGATE_ORIGIN_ADMIN_TOKEN": "aaaaaaaaaaaaaaaa"},
			wantErr: "the admin token (FLASHGATE_ORIGIN_ADMIN_TOKEN, -admin-token) is too weak: it is 16 hex digits"},
		{name: "a repeated word", env: map[string]string{"FLASHGATE_ORIGIN_ADMIN_TOKEN": strings.Repeat("admin!", 10)},
			wantErr: "too weak: it repeats a pattern of 6 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(nil, envWith(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("loadConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.AdminToken != tc.want {
				t.Fatalf("loadConfig = %v, token as wanted %v; want no error and the token", err, c.AdminToken == tc.want)
			}
			if got := strings.Join(warnings, "\n"); (tc.wantWarning == "") != (got == "") || !strings.Contains(got, tc.wantWarning) {
				t.Errorf("warnings = %q, want one with %q", warnings, tc.wantWarning)
			}
		})
	}
}

// The admin listener is loopback unless told otherwise; the two listeners
// never share an address; dev mode listens on loopback only (unless
// allowed, with a warning), with its own user-token secret and without the
// shop's.
func TestListenersAndDevMode(t *testing.T) {
	t.Parallel()
	local := devEnv("1")
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		env         map[string]string
		check       func(app.Config) bool
		wantWarning string
		wantErr     string
	}{
		{name: "defaults", check: func(c app.Config) bool { return c.Addr == ":9090" && c.AdminAddr == "127.0.0.1:9091" && !c.Dev }},
		{name: "one address", env: map[string]string{"FLASHGATE_ORIGIN_ADDR": "10.0.0.5:9000", "FLASHGATE_ORIGIN_ADMIN_ADDR": "10.0.0.5:9000"},
			wantErr: "FLASHGATE_ORIGIN_ADDR (10.0.0.5:9000) and FLASHGATE_ORIGIN_ADMIN_ADDR (10.0.0.5:9000) are one address"},
		{name: "dev on loopback", env: local, check: func(c app.Config) bool { return c.Dev }},
		{name: "dev on all interfaces", env: with(local, "FLASHGATE_ORIGIN_ADDR", ":9090"),
			wantErr: "dev mode listens on loopback addresses only (127.0.0.1:port), not FLASHGATE_ORIGIN_ADDR=:9090; set FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1"},
		{name: "dev with an admin listener on all interfaces", env: with(local, "FLASHGATE_ORIGIN_ADMIN_ADDR", ":9091"),
			wantErr: "not FLASHGATE_ORIGIN_ADMIN_ADDR=:9091"},
		{name: "dev on all interfaces, allowed", env: with(local, "FLASHGATE_ORIGIN_ADDR", ":9090", "FLASHGATE_DEV_ALLOW_NON_LOOPBACK", "1"),
			check: func(c app.Config) bool { return c.Dev }, wantWarning: "DEV MODE LISTENS BEYOND LOOPBACK (FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1): FLASHGATE_ORIGIN_ADDR=:9090"},
		{name: "dev without its secret", env: with(local, "FLASHGATE_DEV_USER_TOKEN_SECRET", ""),
			wantErr: "dev mode needs FLASHGATE_DEV_USER_TOKEN_SECRET of at least 32 bytes"},
		{name: "dev with the shop's secret", env: with(local, "FLASHGATE_USER_TOKEN_SECRET", "shop-user-token-secret-marker-0123456789"),
			wantErr: "dev mode checks user tokens with FLASHGATE_DEV_USER_TOKEN_SECRET only: unset the shop's FLASHGATE_USER_TOKEN_SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(nil, envWith(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("loadConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(c) {
				t.Fatalf("loadConfig = %v, or not the Config %s should give", err, tc.name)
			}
			if got := strings.Join(warnings, "\n"); (tc.wantWarning == "") != (got == "") || !strings.Contains(got, tc.wantWarning) {
				t.Errorf("warnings = %q, want one with %q", warnings, tc.wantWarning)
			}
		})
	}
}
