package main

import (
	"io"
	"strings"
	"testing"
)

func TestLoadOnlyTargetsThisMachine(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:8080":                     true,
		"http://localhost:9091":                     true,
		"http://[::1]:9300":                         true,
		"postgres://postgres@127.0.0.1:5432/db":     true,
		"http://127.0.0.1.example.com:8080":         false,
		"http://10.0.0.5:8080":                      false,
		"postgres://postgres@db.example.com/db":     false,
		"http://example.com/?next=http://127.0.0.1": false,
	} {
		if got := loopback(url); got != want {
			t.Errorf("loopback(%q) = %v, want %v", url, got, want)
		}
	}
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_POSTGRES_URL": "postgres://127.0.0.1/db",
		"FLASHGATE_GATEWAY_CONTROL_TOKEN": "ctl_0123456789abcdef"}
	getenv := func(k string) string { return env[k] }
	if _, err := loadOptions([]string{"-edge-url", "http://127.0.0.1.example.com:8080"}, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("loadOptions(a remote edge) = %v, want a refusal", err)
	}
	if _, err := loadOptions([]string{"-far-edge-url", "http://10.0.0.5:8080"}, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("loadOptions(a remote far edge) = %v, want a refusal", err)
	}
	if _, err := loadOptions([]string{"-far-edge-url", "http://127.0.0.1:7001", "-far-share", "1"}, getenv, io.Discard); err == nil {
		t.Error("loadOptions(-far-share 1) accepted")
	}
	if _, err := loadOptions(nil, getenv, io.Discard); err != nil {
		t.Errorf("loadOptions(defaults) = %v, want nil", err)
	}
}

// Shoppers pay on the sandbox gateway with its control token: from the
// environment, or the flag, which -h never shows filled in.
func TestGatewayControlToken(t *testing.T) {
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_POSTGRES_URL": "postgres://127.0.0.1/db"}
	getenv := func(k string) string { return env[k] }
	if _, err := loadOptions(nil, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "FLASHGATE_GATEWAY_CONTROL_TOKEN") {
		t.Errorf("loadOptions without the control token = %v, want an error naming FLASHGATE_GATEWAY_CONTROL_TOKEN", err)
	}
	if o, err := loadOptions([]string{"-pay", "0"}, getenv, io.Discard); err != nil || o.GatewayToken != "" {
		t.Errorf("loadOptions(-pay 0) without the control token = %v, token %q; want nil, none", err, o.GatewayToken)
	}
	if o, err := loadOptions([]string{"-gateway-control-token", "ctl_flag_0123456789"}, getenv, io.Discard); err != nil || o.GatewayToken != "ctl_flag_0123456789" {
		t.Errorf("loadOptions(-gateway-control-token) = %v, token %q; want the flag's", err, o.GatewayToken)
	}
	env["FLASHGATE_GATEWAY_CONTROL_TOKEN"] = "ctl_env_0123456789"
	if o, err := loadOptions(nil, getenv, io.Discard); err != nil || o.GatewayToken != "ctl_env_0123456789" {
		t.Errorf("loadOptions with $FLASHGATE_GATEWAY_CONTROL_TOKEN = %v, token %q; want the variable's", err, o.GatewayToken)
	}
	var help strings.Builder
	_, _ = loadOptions([]string{"-h"}, getenv, &help)
	if strings.Contains(help.String(), "ctl_env_0123456789") || !strings.Contains(help.String(), "-gateway-control-token") {
		t.Errorf("-h output shows the control token, or not its flag:\n%s", help.String())
	}
}

// No secret the crowd is given reaches -h's output or a flag error's.
func TestSecretsNeverPrinted(t *testing.T) {
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "admin-secret-0123456789", "FLASHGATE_USER_TOKEN_SECRET": "user-secret-0123456789",
		"FLASHGATE_POSTGRES_URL": "postgres://u:pg-secret-0123456789@127.0.0.1/db", "FLASHGATE_GATEWAY_CONTROL_TOKEN": "ctl-secret-0123456789"}
	getenv := func(k string) string { return env[k] }
	for _, args := range [][]string{{"-h"}, {"-no-such-flag"}} {
		var out strings.Builder
		_, _ = loadOptions(args, getenv, &out)
		for _, v := range []string{"admin-secret", "user-secret", "pg-secret", "ctl-secret"} {
			if strings.Contains(out.String(), v) {
				t.Errorf("loadOptions(%q) printed %s:\n%s", args, v, out.String())
			}
		}
	}
	if o, err := loadOptions(nil, getenv, io.Discard); err != nil || o.AdminToken != env["FLASHGATE_ADMIN_TOKEN"] || string(o.UserSecret) != env["FLASHGATE_USER_TOKEN_SECRET"] {
		t.Errorf("loadOptions from the environment = %v, admin %q, secret %q; want both from it", err, o.AdminToken, o.UserSecret)
	}
}
