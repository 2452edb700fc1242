package gowork

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// From this package's folder, two levels down, Root is the repository's
// root: the folder with go.work and the edge's sources.
func TestRootFromANestedFolder(t *testing.T) {
	root, err := Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if root != want {
		t.Errorf("Root() = %s, want %s", root, want)
	}
	if _, err := os.Stat(filepath.Join(root, "edge", "main.go")); err != nil {
		t.Errorf("Root() = %s holds no edge/main.go: %v", root, err)
	}
}

// With GOWORK=off there is no workspace to find, and Root says so rather
// than answering the module's folder.
func TestRootRefusesWithoutAWorkspace(t *testing.T) {
	t.Setenv("GOWORK", "off")
	if root, err := Root(context.Background()); err == nil {
		t.Errorf("Root() with GOWORK=off = %s, want an error", root)
	}
}
