package deploytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"
)

// binaries are the commands the deploy files run, by the name the files give them, with their packages
// relative to the module root.
var binaries = map[string]string{
	"edge":           "./edge",
	"origin":         "./origin",
	"sandboxgateway": "./deploy/sandboxgateway",
}

// moduleRoot is the repository's root, from this package's folder.
const moduleRoot = "../.."

var (
	envOnce  sync.Once
	envNames map[string]map[string]bool // binary → every $FLASHGATE_... its -h names (the _FILE variants too)
	envErr   error
)

var envVarRE = regexp.MustCompile(`\$(FLASHGATE_[A-Z0-9_]+)`)

// binaryEnv returns the environment variables binary reads, as its -h output names them. The binaries are
// built once per test process (one go build for all three, into a temporary folder).
func binaryEnv(t *testing.T, binary string) map[string]bool {
	t.Helper()
	envOnce.Do(func() { envNames, envErr = readBinaryEnv() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	names, ok := envNames[binary]
	if !ok {
		t.Fatalf("no binary %q (have edge, origin, sandboxgateway)", binary)
	}
	return names
}

func readBinaryEnv() (map[string]map[string]bool, error) {
	dir, err := os.MkdirTemp("", "deploytest-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, pkg := range sortedValues(binaries) {
		args = append(args, pkg)
	}
	build := exec.Command("go", args...)
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	out := make(map[string]map[string]bool)
	for name, pkg := range binaries {
		bin := filepath.Join(dir, filepath.Base(pkg))
		help, err := exec.Command(bin, "-h").CombinedOutput()
		// -h exits 0 (flag.ContinueOnError and ErrHelp) or 2 (flag.ExitOnError); both print the flags.
		if err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				return nil, fmt.Errorf("%s -h: %v\n%s", name, err, help)
			}
		}
		names := make(map[string]bool)
		for _, m := range envVarRE.FindAllStringSubmatch(string(help), -1) {
			names[m[1]] = true
		}
		if len(names) < 10 {
			return nil, fmt.Errorf("%s -h names only %d $FLASHGATE_ variables:\n%s", name, len(names), help)
		}
		out[name] = names
	}
	return out, nil
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
