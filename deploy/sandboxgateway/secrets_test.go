package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Neither -h nor a mistyped flag or value prints the API key, the control
// token or the webhook secret; all come from files too, and a variable
// with its file is refused.
func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	keyFile, secretFile, controlFile := filepath.Join(dir, "key"), filepath.Join(dir, "secret"), filepath.Join(dir, "control")
	for path, v := range map[string]string{keyFile: "sk_from_file\n", secretFile: "whsec_new,whsec_old\n", controlFile: "ctl_from_file_0123456789\n"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"-h"}, {"-nope"}, {"-latency", "soon"}, {"-api-key"}, {"-control-token"}, {"-control-token", "ctl_tooshort"}} {
		var stdout, stderr strings.Builder
		err := run(context.Background(), args, env(required), &stdout, &stderr)
		printed := stdout.String() + stderr.String() + fmt.Sprint(err)
		for _, secret := range []string{"sk_env", "whsec_env", required["FLASHGATE_GATEWAY_CONTROL_TOKEN"], "ctl_tooshort"} {
			if strings.Contains(printed, secret) {
				t.Errorf("run(%q) printed %q:\n%s", args, secret, printed)
			}
		}
	}

	c, err := loadConfig(nil, env(map[string]string{
		"FLASHGATE_GATEWAY_API_KEY_FILE": keyFile, "FLASHGATE_GATEWAY_WEBHOOK_SECRET_FILE": secretFile,
		"FLASHGATE_GATEWAY_CONTROL_TOKEN_FILE": controlFile}), &strings.Builder{})
	if err != nil || c.Gateway.APIKey != "sk_from_file" || c.Gateway.ControlToken != "ctl_from_file_0123456789" ||
		strings.Join(c.Gateway.WebhookSecrets, ",") != "whsec_new,whsec_old" {
		t.Errorf("loadConfig with the _FILE variables = %v, key from the file %v, control token from the file %v, secrets %d; want the files' contents",
			err, c.Gateway.APIKey == "sk_from_file", c.Gateway.ControlToken == "ctl_from_file_0123456789", len(c.Gateway.WebhookSecrets))
	}
	both := map[string]string{"FLASHGATE_GATEWAY_API_KEY_FILE": keyFile}
	for k, v := range required {
		both[k] = v
	}
	if _, err := loadConfig(nil, env(both), &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "set $FLASHGATE_GATEWAY_API_KEY or $FLASHGATE_GATEWAY_API_KEY_FILE, not both") {
		t.Errorf("loadConfig with the API key and its file = %v, want an error naming both", err)
	}
}
