package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// make image builds the three images once; each is read back from the OCI layout and from the docker
// tarball, and holds its binary as the entrypoint, the nonroot user, and a binary that runs. The command runs
// as make image runs it, built without the race detector: compressing 60 MB of binaries under it would take
// most of a minute.
func TestImages(t *testing.T) {
	out := t.TempDir()
	cmd := filepath.Join(t.TempDir(), "imagebuild")
	if b, err := exec.Command("go", "build", "-o", cmd, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	if b, err := exec.Command(cmd, "-out", out, "-tag", "test").CombinedOutput(); err != nil {
		t.Fatalf("imagebuild: %v\n%s", err, b)
	}
	p, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	index, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]v1.Hash{}
	for _, d := range manifest.Manifests {
		refs[d.Annotations[refNameAnnotation]] = d.Digest
	}
	if len(refs) != len(imageSpecs) {
		t.Errorf("the OCI layout holds %v, want one image per binary (%d)", refs, len(imageSpecs))
	}
	for _, spec := range imageSpecs {
		ref := "flashgate-" + spec.binary + ":test"
		t.Run(spec.binary, func(t *testing.T) {
			t.Parallel()
			digest, ok := refs[ref]
			if !ok {
				t.Fatalf("the OCI layout has no %s", ref)
			}
			img, err := index.Image(digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			entry := "/usr/local/bin/" + spec.binary
			if got := cfg.Config.Entrypoint; !slices.Equal(got, []string{entry}) {
				t.Errorf("Entrypoint = %q, want [%q]", got, entry)
			}
			if cfg.Config.User != "65532:65532" {
				t.Errorf("User = %q, want 65532:65532", cfg.Config.User)
			}
			if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
				t.Errorf("platform = %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
			}

			files := extract(t, img, "etc/passwd", strings.TrimPrefix(entry, "/"))
			if passwd := string(files["etc/passwd"].body); !strings.Contains(passwd, "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
			}
			bin := files[strings.TrimPrefix(entry, "/")]
			if bin.mode&0o111 == 0 {
				t.Errorf("%s has mode %o, not executable", entry, bin.mode)
			}
			if runtime.GOOS == "linux" {
				runHelp(t, spec.binary, bin.body)
			}

			// The tarball holds the same image under the same tag (its manifest is docker's, its config ours).
			tag, err := name.NewTag(ref)
			if err != nil {
				t.Fatal(err)
			}
			fromTar, err := tarball.ImageFromPath(filepath.Join(out, tarballName), &tag)
			if err != nil {
				t.Fatalf("%s from %s: %v", ref, tarballName, err)
			}
			want, _ := img.ConfigName()
			if got, err := fromTar.ConfigName(); err != nil || got != want {
				t.Errorf("%s in %s has config %v (%v), the layout's %v", ref, tarballName, got, err, want)
			}
		})
	}
}

type entry struct {
	mode int64
	body []byte
}

// extract reads the named files of img's flattened filesystem.
func extract(t *testing.T, img v1.Image, names ...string) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := strings.TrimPrefix(h.Name, "/")
		if !slices.Contains(names, n) {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = entry{h.Mode, b}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Fatalf("the image has no /%s", n)
		}
	}
	return out
}

// helpRuns makes runHelp's write-then-run one at a time.
var helpRuns sync.Mutex

// runHelp runs the image's binary with -h: it exits 0 (or 2, flag's usage exit) and prints its usage.
func runHelp(t *testing.T, binary string, body []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), binary)
	// One subtest writing its binary while another forks to run its own
	// hands the child the file still open for writing until the child
	// execs, and running it meanwhile fails with "text file busy"
	// (golang.org/issue/22315): the subtests write and run one at a time.
	helpRuns.Lock()
	defer helpRuns.Unlock()
	if err := os.WriteFile(path, body, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "-h").CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 2) {
		t.Fatalf("%s -h: %v\n%s", binary, err, out)
	}
	if !strings.Contains(string(out), "Usage") || !strings.Contains(string(out), "$FLASHGATE_") {
		t.Errorf("%s -h printed no usage:\n%s", binary, out)
	}
}

// run refuses what it does not take, before building anything.
func TestRunRefusesArguments(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-out", t.TempDir(), "extra"}, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("run(extra) = %v, want an error naming the argument", err)
	}
	if err := run(context.Background(), []string{"-no-such-flag"}, io.Discard, &stderr); err == nil {
		t.Errorf("run(-no-such-flag) = nil, want an error")
	}
}
