// Package stripemock starts Stripe's mock server for tests.
package stripemock

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testenv"
)

// stripeMockInstall is how a machine gets the stripe-mock these tests run
// against (deploy/local/test.sh runs it when the binary is missing).
const stripeMockInstall = "go install github.com/stripe/stripe-mock@v0.203.0"

// findStripeMock is the stripe-mock binary: on PATH, or where go install
// puts it ($GOBIN, else each $GOPATH's bin).
func findStripeMock(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		if gobin, gopath, ok := strings.Cut(strings.TrimRight(string(out), "\n"), "\n"); ok {
			if gobin != "" {
				dirs = append(dirs, gobin)
			}
			for _, gp := range filepath.SplitList(gopath) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "stripe-mock")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Fatalf("stripe-mock is not installed (looked in PATH and %v); install it with: %s", dirs, stripeMockInstall)
	return ""
}

// Start starts stripe-mock (Stripe's mock server, which validates
// each request against Stripe's OpenAPI description and answers with its
// fixtures) on a free port, waits until it answers a call made with key (a
// test-mode secret key), and stops it when the test ends. It returns its
// base URL. Without the binary the test fails, naming the command that
// installs it (deploy/local/test.sh runs it for make test).
func Start(t testing.TB, key string) string {
	t.Helper()
	// -http-port 0: HTTP only (HTTPS off), on a port the system picks,
	// which stripe-mock prints.
	cmd := exec.Command(findStripeMock(t), "-http-port", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				select {
				case addrs <- a:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var port string
	select {
	case a := <-addrs:
		if _, port, err = net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			t.Fatalf("stripe-mock listens at %q: %v", a, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("stripe-mock did not say where it listens within 30 s; stderr: %s", stderr.String())
	}
	base := "http://127.0.0.1:" + port
	var last error // of the latest call
	up := false
	defer func() {
		if !up { // Eventually failed t: say why
			t.Logf("stripe-mock's last call: %v; stderr: %s", last, stderr.String())
		}
	}()
	testenv.Eventually(t, 30*time.Second, "stripe-mock at "+base+" answering 200", func() bool {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/charges", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if last = err; err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	up = true
	return base
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
