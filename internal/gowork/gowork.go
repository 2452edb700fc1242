// Package gowork finds the repository's root for the lab's tools, which
// build the product's binaries or read its files from wherever they run.
package gowork

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Root is the folder of the go.work that holds the working directory: the
// repository's root, above the product module and the lab's nested ones.
func Root(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" || work == os.DevNull {
		return "", errors.New("not inside the flashgate repository (no go.work above the working directory, or GOWORK=off)")
	}
	return filepath.Dir(work), nil
}
