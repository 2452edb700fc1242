package main

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdreport"
	"github.com/flashgate/flashgate/bench/internal/crowdsim"
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

// make bench's runs: the same scenario with the defences off, then on,
// each a sale of its own; the first is the report's flashgate run, the
// second its defended one. A failed run ends it, naming its mode.
func TestRunDefences(t *testing.T) {
	var played []crowdsim.Config
	play := func(_ context.Context, c crowdsim.Config) (*crowdsim.Result, error) {
		played = append(played, c)
		if c.Defences.Mode == "broken" {
			return nil, errors.New("boom")
		}
		return &crowdsim.Result{Mode: "flashgate", Bots: crowdsim.Bots{Defences: c.Defences}}, nil
	}
	o := options{Config: crowdsim.Config{SaleID: "given", Seed: 9, Scenario: crowdsim.DefaultScenario()},
		DefenceModes: []string{crowdsim.DefencesOff, crowdsim.DefencesOn}}
	var runs crowdreport.Runs
	if _, err := runDefences(context.Background(), o, "make bench", &runs, play); err != nil {
		t.Fatalf("runDefences = %v", err)
	}
	if len(played) != 2 || played[0].Defences.Mode != "off" || played[1].Defences.Mode != "on" ||
		played[0].SaleID != "given" || played[1].SaleID != "" || played[0].Seed != 9 || played[1].Seed != 9 ||
		played[0].Scenario != played[1].Scenario {
		t.Errorf("played %+v; want off (sale given), then on (a sale of its own), the same crowd", played)
	}
	if runs.Flashgate.Bots.Defences.Mode != "off" || runs.Defended == nil || runs.Defended.Bots.Defences.Mode != "on" ||
		runs.Flashgate.Command != "make bench" || runs.Defended.Command != "make bench" {
		t.Errorf("runs: flashgate %q, defended %+v; want off and on, with the command", runs.Flashgate.Bots.Defences.Mode, runs.Defended)
	}

	played, runs = nil, crowdreport.Runs{}
	o.DefenceModes = nil
	if _, err := runDefences(context.Background(), o, "bin/crowd", &runs, play); err != nil || len(played) != 1 ||
		played[0].Defences.Mode != "" || runs.Defended != nil {
		t.Errorf("without modes: %v, played %+v, defended %v; want one run, the defences as they are", err, played, runs.Defended)
	}
	o.DefenceModes = []string{"off", "broken", "on"}
	played = nil
	if _, err := runDefences(context.Background(), o, "", &runs, play); err == nil || !strings.Contains(err.Error(), "defences broken: boom") ||
		len(played) != 2 {
		t.Errorf("a failed run: %v after %d runs; want the error, named, and no run after it", err, len(played))
	}
}

// -defences, the cohorts' flags and make bench's command line.
func TestDefenceAndCohortFlags(t *testing.T) {
	env := map[string]string{"FLASHGATE_ADMIN_TOKEN": "t", "FLASHGATE_USER_TOKEN_SECRET": "s", "FLASHGATE_POSTGRES_URL": "postgres://127.0.0.1/db",
		"FLASHGATE_GATEWAY_CONTROL_TOKEN": "ctl_0123456789abcdef"}
	getenv := func(k string) string { return env[k] }
	o, err := loadOptions(strings.Fields(benchFlags+" -bot-ips 0 -smart-bot-per-instrument 10 -challenge-bits 6 -reaction 2"), getenv, io.Discard)
	if err != nil {
		t.Fatalf("loadOptions(make bench's flags) = %v", err)
	}
	want := crowdsim.SmartCohort(1000)
	want.AccountsPerInstrument = 10
	if !reflect.DeepEqual(o.DefenceModes, []string{"off", "on"}) || o.Smart != want || o.Hammering.Addresses != 0 ||
		o.Hammering.Accounts != 200 || o.Defences.ChallengeBits != 6 || o.ReactionS != 2 {
		t.Errorf("options: modes %v, smart %+v, hammering %+v, challenge bits %d, reaction %v", o.DefenceModes, o.Smart, o.Hammering,
			o.Defences.ChallengeBits, o.ReactionS)
	}
	for _, args := range [][]string{
		{"-defences", "sometimes"}, {"-defences", "on,on"}, {"-bot-ips", "300"}, {"-smart-bot-poll-ms", "-1"},
		{"-challenge-bits", "40"}, {"-defences", "off,on", "-sweep", "500"}, {"-smart-bots", "-5"},
	} {
		if _, err := loadOptions(args, getenv, io.Discard); err == nil {
			t.Errorf("loadOptions(%q) accepted", args)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{strings.Fields(benchFlags), "make bench"},
		{strings.Fields(benchFlags + " -shoppers 20000"), "make bench CROWD_FLAGS='-shoppers 20000'"},
		{[]string{"-shoppers", "20000"}, "bin/crowd -shoppers 20000"},
		{nil, "bin/crowd"},
	} {
		if got := command(tt.args); got != tt.want {
			t.Errorf("command(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
