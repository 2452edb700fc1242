// Package configtest is the shared suite of the binaries' configuration
// tests: what edge and origin promise alike about their secrets, admin
// tokens, listeners and dev mode, run against each one's own loadConfig
// and run.
package configtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Binary is one binary under the suite; C is its Config.
type Binary[C any] struct {
	// Tier names the binary's own variables: "EDGE" for
	// FLASHGATE_EDGE_ADDR, FLASHGATE_EDGE_ADMIN_ADDR and
	// FLASHGATE_EDGE_ADMIN_TOKEN.
	Tier string
	// Env is a valid configuration outside dev mode in which every secret
	// variable is set, to a value no output may show (a password inside a
	// URL must be unique to it), and so are FLASHGATE_USER_TOKEN_ISSUER and
	// FLASHGATE_USER_TOKEN_AUDIENCE: it loads without warnings.
	Env map[string]string
	// Secrets are the values in Env, or the passwords in them, that no
	// output may show.
	Secrets []string
	// Fields reads the setting of each secret variable of Env, and of
	// FLASHGATE_ADMIN_TOKEN, from a Config.
	Fields map[string]func(C) string
	// Load is the binary's loadConfig; Run its run, which must fail
	// before it serves when its configuration is refused.
	Load func(args []string, getenv func(string) string, stderr io.Writer) (C, []string, error)
	Run  func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error
	// Listeners returns a Config's public and admin addresses and
	// whether dev mode is on.
	Listeners func(C) (public, admin string, dev bool)
	// DefaultAddr and DefaultAdminAddr are the listeners' defaults.
	DefaultAddr, DefaultAdminAddr string
}

// AdminToken is a strong admin token (32 random bytes in base64), and
// OtherAdminToken another.
const (
	AdminToken      = "j+oVUiXKdsPorCFgHdC4M+CZ+HJQIAhw9377Zl3vnE0="
	OtherAdminToken = "ISvBaq64UAgPI1ccurwGHv3uyHTtnH7ZDlXgQQ4xoMs="
)

// devSecret is a dev user-token secret long enough for dev mode.
const devSecret = "dev-user-token-secret-0123456789abcdef"

// envWith is b.Env with changes; "" unsets a variable.
func (b Binary[C]) envWith(changes map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := changes[k]; ok {
			return v
		}
		return b.Env[k]
	}
}

// DevEnv is what dev mode needs, as changes to Env: FLASHGATE_DEV=1, a dev
// user-token secret and not the shop's, and a loopback public listener.
func (b Binary[C]) DevEnv() map[string]string {
	return map[string]string{"FLASHGATE_DEV": "1", "FLASHGATE_USER_TOKEN_SECRET": "",
		"FLASHGATE_DEV_USER_TOKEN_SECRET": devSecret, "FLASHGATE_" + b.Tier + "_ADDR": "127.0.0.1:1"}
}

// SecretsAreNeverPrinted: neither -h, nor a mistyped flag or value, nor a
// variable or setting that is refused prints a secret, whether it came from
// a variable or a file.
func (b Binary[C]) SecretsAreNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	fromFiles := map[string]string{}
	for k, v := range b.Env {
		if _, secret := b.Fields[k]; !secret {
			continue
		}
		path := filepath.Join(dir, k)
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fromFiles[k], fromFiles[k+"_FILE"] = "", path
	}
	redisURL := "redis://u:" + b.passwordIn("FLASHGATE_REDIS_URL")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		help bool
	}{
		{name: "-h", args: []string{"-h"}, help: true},
		{name: "-help from files", env: fromFiles, args: []string{"-help"}, help: true},
		{name: "unknown flag", args: []string{"-nope"}},
		{name: "unknown flag, from files", env: fromFiles, args: []string{"-nope"}},
		{name: "flag without its value", args: []string{"-admin-token"}},
		{name: "bad flag value", args: []string{"-read-timeout", "soon"}},
		{name: "bad variable", env: map[string]string{"FLASHGATE_READ_TIMEOUT": "soon"}},
		{name: "refused setting", args: []string{"-dev"}},
		{name: "refused setting, from files", env: fromFiles, args: []string{"-dev"}},
		{name: "bad Redis URL", env: map[string]string{"FLASHGATE_REDIS_URL": redisURL + "@127.0.0.1:nope/0"}},
		{name: "Redis password with a '#'", env: map[string]string{"FLASHGATE_REDIS_URL": redisURL + "#x@127.0.0.1:6379/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := b.Run(context.Background(), tc.args, b.envWith(tc.env), &stdout, &stderr)
			if (err == nil) != tc.help {
				t.Errorf("run(%q) = %v, want an error %v", tc.args, err, !tc.help)
			}
			printed := stdout.String() + stderr.String() + fmt.Sprint(err)
			for _, secret := range b.Secrets {
				if strings.Contains(printed, secret) {
					t.Errorf("run(%q) printed the secret %q:\n%s", tc.args, secret, printed)
				}
			}
		})
	}
}

// passwordIn returns the password of the URL in Env[env].
func (b Binary[C]) passwordIn(env string) string {
	userinfo, _, _ := strings.Cut(strings.SplitN(b.Env[env], "://", 2)[1], "@")
	_, password, _ := strings.Cut(userinfo, ":")
	return password
}

// SecretFiles: every secret can come from a file instead of its variable
// (a trailing newline dropped), and setting both is refused.
func (b Binary[C]) SecretFiles(t *testing.T) {
	dir := t.TempDir()
	own := "FLASHGATE_" + b.Tier + "_ADMIN_TOKEN"
	for env, get := range b.Fields {
		t.Run(env, func(t *testing.T) {
			want := b.Env[env]
			changes := map[string]string{env: ""}
			if env == "FLASHGATE_ADMIN_TOKEN" { // the fallback of the tier's own
				want, changes[own] = OtherAdminToken, ""
			}
			path := filepath.Join(dir, env)
			if err := os.WriteFile(path, []byte(want+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			changes[env+"_FILE"] = path
			c, _, err := b.Load(nil, b.envWith(changes), io.Discard)
			if got := err == nil && get(c) == want; !got {
				t.Errorf("loadConfig with $%s_FILE = %v; got the file's content: %v", env, err, got)
			}
			changes[env] = want
			if _, _, err := b.Load(nil, b.envWith(changes), io.Discard); err == nil || !strings.Contains(err.Error(), "set $"+env+" or $"+env+"_FILE, not both") {
				t.Errorf("loadConfig with $%s and $%s_FILE = %v, want an error naming both", env, env, err)
			}
		})
	}
}

// AdminTokens: the tier has an admin token of its own, strong; the shared
// FLASHGATE_ADMIN_TOKEN still works, with a warning.
func (b Binary[C]) AdminTokens(t *testing.T) {
	own := "FLASHGATE_" + b.Tier + "_ADMIN_TOKEN"
	get := b.Fields[own]
	for _, tc := range []struct {
		name        string
		env         map[string]string
		args        []string
		want        string
		wantWarning string // a part of the one warning; "" = none
		wantErr     string
	}{
		{name: "its own", want: b.Env[own]},
		{name: "the shared one", env: map[string]string{own: "", "FLASHGATE_ADMIN_TOKEN": OtherAdminToken},
			want: OtherAdminToken, wantWarning: "one admin token (FLASHGATE_ADMIN_TOKEN) serves the "},
		{name: "its own wins", env: map[string]string{"FLASHGATE_ADMIN_TOKEN": OtherAdminToken}, want: b.Env[own]},
		{name: "the flag wins, no warning", env: map[string]string{own: "", "FLASHGATE_ADMIN_TOKEN": OtherAdminToken},
			args: []string{"-admin-token", b.Env[own]}, want: b.Env[own]},
		{name: "none", env: map[string]string{own: ""},
			wantErr: own + " (-admin-token) is required; make one with `openssl rand -base64 32`"},
		{name: "16 of one letter", env: map[string]string{own: "aaaaaaaaaaaaaaaa"},
			wantErr: "the admin token (" + own + ", -admin-token) is too weak: it is 16 hex digits"},
		{name: "64 of one letter", env: map[string]string{own: strings.Repeat("a", 64)},
			wantErr: "too weak: it repeats a pattern of 1 characters"},
		{name: "a repeated word", env: map[string]string{own: strings.Repeat("admin!", 10)},
			wantErr: "too weak: it repeats a pattern of 6 characters"},
		{name: "16 random bytes", env: map[string]string{own: "9f86d081884c7d659a2feaa0c55ad015"},
			wantErr: "too weak: it is 32 hex digits, which hold at most 128 random bits; want 256; make one with `openssl rand -base64 32`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := b.Load(tc.args, b.envWith(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("loadConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || get(c) != tc.want {
				t.Fatalf("loadConfig = %v; the token wanted: %v", err, err == nil && get(c) == tc.want)
			}
			checkWarning(t, warnings, tc.wantWarning)
		})
	}
}

// ListenersAndDevMode: the admin listener is loopback unless told
// otherwise; the two listeners never share an address; dev mode listens on
// loopback only (unless allowed, with a warning), with its own user-token
// secret and without the shop's key.
func (b Binary[C]) ListenersAndDevMode(t *testing.T) {
	addr, admin := "FLASHGATE_"+b.Tier+"_ADDR", "FLASHGATE_"+b.Tier+"_ADMIN_ADDR"
	dev := b.DevEnv()
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
		wantDev     bool
		wantWarning string
		wantErr     string
	}{
		{name: "defaults"},
		{name: "one address", env: map[string]string{addr: "10.0.0.5:9000", admin: "10.0.0.5:9000"},
			wantErr: addr + " (10.0.0.5:9000) and " + admin + " (10.0.0.5:9000) are one address"},
		{name: "one port, all interfaces and loopback", env: map[string]string{addr: ":9000", admin: "127.0.0.1:9000"},
			wantErr: "are one address"},
		{name: "dev on loopback", env: dev, wantDev: true},
		{name: "dev on all interfaces", env: with(dev, addr, ":1"),
			wantErr: "dev mode listens on loopback addresses only (127.0.0.1:port), not " + addr + "=:1; set FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1"},
		{name: "dev with an admin listener on all interfaces", env: with(dev, admin, "0.0.0.0:2"),
			wantErr: "not " + admin + "=0.0.0.0:2"},
		{name: "dev on all interfaces, allowed", env: with(dev, addr, ":1", "FLASHGATE_DEV_ALLOW_NON_LOOPBACK", "1"),
			wantDev: true, wantWarning: "DEV MODE LISTENS BEYOND LOOPBACK (FLASHGATE_DEV_ALLOW_NON_LOOPBACK=1): " + addr + "=:1"},
		{name: "dev without its secret", env: with(dev, "FLASHGATE_DEV_USER_TOKEN_SECRET", ""),
			wantErr: "dev mode needs FLASHGATE_DEV_USER_TOKEN_SECRET of at least 32 bytes"},
		{name: "dev with a short secret", env: with(dev, "FLASHGATE_DEV_USER_TOKEN_SECRET", "short"),
			wantErr: "dev mode needs FLASHGATE_DEV_USER_TOKEN_SECRET of at least 32 bytes"},
		{name: "dev with the shop's secret", env: with(dev, "FLASHGATE_USER_TOKEN_SECRET", b.Env["FLASHGATE_USER_TOKEN_SECRET"]),
			wantErr: "dev mode checks user tokens with FLASHGATE_DEV_USER_TOKEN_SECRET only: unset the shop's FLASHGATE_USER_TOKEN_SECRET"},
		{name: "dev with the shop's public key", env: with(dev, "FLASHGATE_USER_TOKEN_PUBLIC_KEY_FILE", "/shop.pem"),
			wantErr: "dev mode checks user tokens with FLASHGATE_DEV_USER_TOKEN_SECRET only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := b.Load(nil, b.envWith(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("loadConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig = %v", err)
			}
			if public, adm, isDev := b.Listeners(c); isDev != tc.wantDev || (tc.env == nil && (public != b.DefaultAddr || adm != b.DefaultAdminAddr)) {
				t.Errorf("loadConfig: listeners %q and %q, dev %v; want dev %v (and by default %q, %q)",
					public, adm, isDev, tc.wantDev, b.DefaultAddr, b.DefaultAdminAddr)
			}
			checkWarning(t, warnings, tc.wantWarning)
		})
	}
}

// checkWarning fails t unless warnings are one with want in it, or none
// when want is "".
func checkWarning(t *testing.T, warnings []string, want string) {
	t.Helper()
	if got := strings.Join(warnings, "\n"); len(warnings) > 1 || (want == "") != (got == "") || !strings.Contains(got, want) {
		t.Errorf("warnings = %q, want one with %q", warnings, want)
	}
}

// UserTokens: user tokens cannot be mixed with our own. A user-token
// secret, the shop's or dev mode's, that is a token key's secret (any key
// of the set) or its base64 spelling is refused at start, before the
// binary serves, and the refusal names the settings but no secret; so are
// our own tokens' issuer and audiences as the user tokens'. Outside dev
// mode an unchecked issuer or audience is a warning naming the setting.
func (b Binary[C]) UserTokens(t *testing.T) {
	keys := b.Env["FLASHGATE_TOKEN_KEYS"]
	kid, b64, _ := strings.Cut(keys, ":")
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("the suite's FLASHGATE_TOKEN_KEYS is not kid:base64: %v", err)
	}
	other := "k0:" + base64.StdEncoding.EncodeToString([]byte("another-token-key-secret-0123456789"))
	refusal := "is the secret of token key " + strconv.Quote(kid) + " in FLASHGATE_TOKEN_KEYS (or its base64): " +
		"whoever signs user tokens could sign queue and admission tokens, and those would pass as user tokens"
	dev := b.DevEnv()
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		if m == nil {
			m = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	unchecked := func(claims, settings string) string {
		return "USER TOKENS' " + claims + " NOT CHECKED: " + settings + " unset, so any token the shop signs with the user-token key passes"
	}
	for _, tc := range []struct {
		name        string
		env         map[string]string
		wantErr     string
		wantWarning string
	}{
		{name: "the shop's secret is the token key", env: with(nil, "FLASHGATE_USER_TOKEN_SECRET", string(key)),
			wantErr: "FLASHGATE_USER_TOKEN_SECRET " + refusal},
		{name: "the shop's secret is the token key's base64", env: with(nil, "FLASHGATE_USER_TOKEN_SECRET", b64),
			wantErr: "FLASHGATE_USER_TOKEN_SECRET " + refusal},
		{name: "the shop's secret is a key that only verifies", env: with(nil, "FLASHGATE_TOKEN_KEYS", other+","+keys,
			"FLASHGATE_USER_TOKEN_SECRET", string(key)), wantErr: "FLASHGATE_USER_TOKEN_SECRET " + refusal},
		{name: "dev mode's secret is the token key", env: with(dev, "FLASHGATE_DEV_USER_TOKEN_SECRET", string(key)),
			wantErr: "FLASHGATE_DEV_USER_TOKEN_SECRET " + refusal},
		{name: "an unused dev secret is the token key", env: with(nil, "FLASHGATE_DEV_USER_TOKEN_SECRET", string(key)),
			wantErr: "FLASHGATE_DEV_USER_TOKEN_SECRET " + refusal},
		{name: "a bad token key", env: with(nil, "FLASHGATE_TOKEN_KEYS", kid+":c2hvcnQ="),
			wantErr: "config: FLASHGATE_TOKEN_KEYS: tokens: secret for kid " + strconv.Quote(kid) + " is 5 bytes, want at least 32"},
		{name: "our issuer", env: with(nil, "FLASHGATE_USER_TOKEN_ISSUER", "flashgate"),
			wantErr: `FLASHGATE_USER_TOKEN_ISSUER may not be "flashgate", the issuer of our own queue and admission tokens`},
		{name: "our edges' audience", env: with(nil, "FLASHGATE_USER_TOKEN_AUDIENCE", "edge"),
			wantErr: `FLASHGATE_USER_TOKEN_AUDIENCE may not be "edge", an audience of our own queue and admission tokens`},
		{name: "our origins' audience", env: with(nil, "FLASHGATE_USER_TOKEN_AUDIENCE", "origin"),
			wantErr: `FLASHGATE_USER_TOKEN_AUDIENCE may not be "origin"`},
		{name: "issuer and audience checked"},
		{name: "no issuer", env: with(nil, "FLASHGATE_USER_TOKEN_ISSUER", ""),
			wantWarning: unchecked("ISSUER IS", "FLASHGATE_USER_TOKEN_ISSUER is")},
		{name: "no audience", env: with(nil, "FLASHGATE_USER_TOKEN_AUDIENCE", ""),
			wantWarning: unchecked("AUDIENCE IS", "FLASHGATE_USER_TOKEN_AUDIENCE is")},
		{name: "neither", env: with(nil, "FLASHGATE_USER_TOKEN_ISSUER", "", "FLASHGATE_USER_TOKEN_AUDIENCE", ""),
			wantWarning: unchecked("ISSUER AND AUDIENCE ARE", "FLASHGATE_USER_TOKEN_ISSUER and FLASHGATE_USER_TOKEN_AUDIENCE are")},
		{name: "neither, in dev mode", env: with(dev, "FLASHGATE_USER_TOKEN_ISSUER", "", "FLASHGATE_USER_TOKEN_AUDIENCE", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, warnings, err := b.Load(nil, b.envWith(tc.env), io.Discard)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("loadConfig = %v", err)
				}
				checkWarning(t, warnings, tc.wantWarning)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("loadConfig = %v, want an error with %q", err, tc.wantErr)
			}
			// Bounded, lest a binary that does start serve until the test times out.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr strings.Builder
			runErr := b.Run(ctx, nil, b.envWith(tc.env), &stdout, &stderr)
			if runErr == nil || runErr.Error() != fmt.Sprint(err) {
				t.Errorf("run = %v, want loadConfig's error %v", runErr, err)
			}
			printed := stdout.String() + stderr.String() + fmt.Sprint(runErr)
			for _, secret := range append([]string{string(key), strings.TrimRight(b64, "=")}, b.Secrets...) {
				if strings.Contains(printed, secret) {
					t.Errorf("run printed the secret %q:\n%s", secret, printed)
				}
			}
		})
	}
}
