package deploytest

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of the Compose specification deploy/docker/compose.yaml uses. It is decoded
// strictly, so a key this struct lacks fails the test: a misspelt key Compose would ignore (or refuse) is
// caught here, and TestComposeLoadsWithComposeGo holds this reading against compose-go's.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `json:"subnet"`
			} `json:"config"`
		} `json:"ipam"`
	} `json:"networks"`
	Volumes map[string]struct{} `json:"volumes"`
	Secrets map[string]struct {
		Environment string `json:"environment"`
		File        string `json:"file"`
	} `json:"secrets"`
}

type composeService struct {
	Image string `json:"image"`
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
		Target     string `json:"target"`
	} `json:"build"`
	Command     []string          `json:"command"`
	Hostname    string            `json:"hostname"`
	Environment map[string]string `json:"environment"`
	Secrets     []string          `json:"secrets"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck *struct {
		Test     []string `json:"test"`
		Interval string   `json:"interval"`
		Timeout  string   `json:"timeout"`
		Retries  int      `json:"retries"`
	} `json:"healthcheck"`
	Networks        any      `json:"networks"` // a list of names, or names to their settings
	ReadOnly        bool     `json:"read_only"`
	CapDrop         []string `json:"cap_drop"`
	SecurityOpt     []string `json:"security_opt"`
	StopGracePeriod string   `json:"stop_grace_period"`
	Restart         string   `json:"restart"`
}

const composePath = "../docker/compose.yaml"

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("deploy/docker/compose.yaml: %v", err)
	}
	return c
}

// composeShape is the cluster's shape, as deploy/k8s and make run-cluster run it: service → what runs it
// (a Dockerfile target, or an image's name before its tag).
var composeShape = map[string]string{
	"cdn":           "nginx",
	"edge-1":        "edge",
	"edge-2":        "edge",
	"origin-1":      "origin",
	"origin-2":      "origin",
	"gateway":       "sandboxgateway",
	"postgres":      "postgres",
	"redis-primary": "redis",
	"redis-replica": "redis",
	"sentinel-1":    "redis",
	"sentinel-2":    "redis",
	"sentinel-3":    "redis",
}

// The compose file runs the cluster's shape; every flashgate service is built from deploy/docker/Dockerfile's
// target of its binary, reads only variables its binary has, gets its secrets as files it is given, listens
// where its ports point, and runs read-only without capabilities; dependencies name services and do not loop.
func TestCompose(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	stages := dockerfileStages(t)
	for name := range composeShape {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("compose.yaml has no service %s", name)
		}
	}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		where := "compose.yaml service " + name
		runs, ok := composeShape[name]
		if !ok {
			t.Errorf("%s: not in the cluster's shape (this test's composeShape)", where)
			continue
		}
		for dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("%s: depends_on %s, no such service", where, dep)
			}
		}
		for _, sec := range s.Secrets {
			if _, ok := c.Secrets[sec]; !ok {
				t.Errorf("%s: secret %s is not declared under secrets", where, sec)
			}
		}
		for _, p := range s.Ports {
			host, _, ok := strings.Cut(p, ":")
			if !ok || host != "127.0.0.1" {
				t.Errorf("%s: port %q: publish on 127.0.0.1 only (host:port:container)", where, p)
			}
		}
		if _, isBinary := binaries[runs]; !isBinary {
			if s.Build != nil || !strings.HasPrefix(s.Image, runs+":") {
				t.Errorf("%s: image %q, want %s:<tag> and no build", where, s.Image, runs)
			}
			for env := range s.Environment {
				if strings.HasPrefix(env, "FLASHGATE_") && name != "cdn" {
					t.Errorf("%s: sets %s, but runs no flashgate binary", where, env)
				}
			}
			continue
		}
		// A flashgate binary.
		if s.Build == nil {
			t.Errorf("%s: no build", where)
			continue
		}
		if ctx := filepath.Clean(filepath.Join("../docker", s.Build.Context)); ctx != filepath.Clean(moduleRoot) {
			t.Errorf("%s: build context %s is not the repository's root", where, s.Build.Context)
		}
		if s.Build.Dockerfile != "deploy/docker/Dockerfile" || s.Build.Target != runs || !slices.Contains(stages, runs) {
			t.Errorf("%s: build %+v, want deploy/docker/Dockerfile's target %s (stages %v)", where, *s.Build, runs, stages)
		}
		if s.Image != "flashgate-"+runs+":dev" {
			t.Errorf("%s: image %q, want flashgate-%s:dev (as make image names it)", where, s.Image, runs)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: wants read_only, cap_drop [ALL] and no-new-privileges", where)
		}
		known := binaryEnv(t, runs)
		for _, env := range sortedKeys(s.Environment) {
			v := s.Environment[env]
			if !known[env] {
				t.Errorf("%s: %s is no variable of %s (-h)", where, env, runs)
			}
			if _, ok := strings.CutSuffix(env, "_FILE"); ok {
				sec, ok := strings.CutPrefix(v, "/run/secrets/")
				if !ok || !slices.Contains(s.Secrets, sec) {
					t.Errorf("%s: %s=%s is no secret the service is given", where, env, v)
				}
			}
		}
		checkComposeAddrs(t, c, name, s)
	}
	if cycle := dependencyCycle(c); cycle != nil {
		t.Errorf("compose.yaml: depends_on loops: %v", cycle)
	}
}

// checkComposeAddrs holds a flashgate service's addresses against the stack: its published ports are its
// listeners', the URLs and Sentinels it dials are services of the file.
func checkComposeAddrs(t *testing.T, c composeFile, name string, s composeService) {
	t.Helper()
	where := "compose.yaml service " + name
	listens := map[string]bool{}
	for env, v := range s.Environment {
		if strings.HasSuffix(env, "_ADDR") {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				t.Errorf("%s: %s=%q: %v", where, env, v, err)
			}
			listens[port] = true
			if strings.Contains(env, "ADMIN") && !strings.HasPrefix(v, "0.0.0.0:") {
				t.Errorf("%s: %s=%q: in a container the admin listener must listen on 0.0.0.0", where, env, v)
			}
		}
	}
	for _, p := range s.Ports {
		parts := strings.Split(p, ":")
		if container := parts[len(parts)-1]; !listens[container] {
			t.Errorf("%s: publishes %q, but listens on none of that port (%v)", where, p, listens)
		}
	}
	for _, env := range []string{"FLASHGATE_ORIGIN_URL", "FLASHGATE_GATEWAY_URL", "FLASHGATE_GATEWAY_WEBHOOK_URL"} {
		if v, ok := s.Environment[env]; ok {
			u, err := url.Parse(v)
			if err != nil {
				t.Errorf("%s: %s=%q: %v", where, env, v, err)
				continue
			}
			if _, ok := c.Services[u.Hostname()]; !ok {
				t.Errorf("%s: %s=%q names no service", where, env, v)
			}
		}
	}
	if v, ok := s.Environment["FLASHGATE_REDIS_SENTINELS"]; ok {
		for _, hp := range strings.Split(v, ",") {
			host, _, _ := net.SplitHostPort(hp)
			if !strings.HasPrefix(host, "sentinel-") || c.Services[host].Image == "" {
				t.Errorf("%s: FLASHGATE_REDIS_SENTINELS names %q, not a sentinel service", where, hp)
			}
		}
	}
}

var placeholderRE = regexp.MustCompile(`\$\{(FLASHGATE_CDN_[A-Z_]+)\}`)

// The CDN service mounts deploy/cdn's nginx template into nginx's templates folder, fills in exactly its
// placeholders, and sends to every edge service.
func TestComposeCDN(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	cdn := c.Services["cdn"]
	var template string
	for _, v := range cdn.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		if strings.HasPrefix(dst, "/etc/nginx/templates/") {
			template = filepath.Join("../docker", src)
		}
	}
	if template == "" {
		t.Fatalf("the cdn service mounts nothing into /etc/nginx/templates/")
	}
	b, err := os.ReadFile(template)
	if err != nil {
		t.Fatalf("the cdn service's template: %v", err)
	}
	placeholders := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(string(b), -1) {
		placeholders[m[1]] = true
	}
	for _, p := range sortedKeys(placeholders) {
		if cdn.Environment[p] == "" {
			t.Errorf("the cdn service does not fill %s of %s", p, template)
		}
	}
	for env := range cdn.Environment {
		if strings.HasPrefix(env, "FLASHGATE_") && !placeholders[env] {
			t.Errorf("the cdn service sets %s, no placeholder of %s", env, template)
		}
	}
	if f := cdn.Environment["NGINX_ENVSUBST_FILTER"]; f == "" || !regexp.MustCompile(f).MatchString("FLASHGATE_CDN_EDGES") || regexp.MustCompile(f).MatchString("host") {
		t.Errorf("NGINX_ENVSUBST_FILTER=%q must keep envsubst to the FLASHGATE_CDN_ placeholders", f)
	}
	for name, runs := range composeShape {
		if runs == "edge" && !strings.Contains(cdn.Environment["FLASHGATE_CDN_EDGES"], "server "+name+":8080;") {
			t.Errorf("FLASHGATE_CDN_EDGES=%q leaves out %s", cdn.Environment["FLASHGATE_CDN_EDGES"], name)
		}
	}
}

// dependencyCycle returns a loop of depends_on, or nil.
func dependencyCycle(c composeFile) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(string) []string
	visit = func(n string) []string {
		switch state[n] {
		case open:
			return append(slices.Clone(stack), n)
		case done:
			return nil
		}
		state[n] = open
		stack = append(stack, n)
		for _, dep := range sortedKeys(c.Services[n].DependsOn) {
			if cycle := visit(dep); cycle != nil {
				return cycle
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(c.Services) {
		if cycle := visit(n); cycle != nil {
			return cycle
		}
	}
	return nil
}

var (
	fromRE       = regexp.MustCompile(`(?m)^FROM\s+\S+\s+AS\s+(\S+)\s*$`)
	goVersionRE  = regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`)
	goDirectRE   = regexp.MustCompile(`(?m)^go (\S+)$`)
	entrypointRE = regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/([a-z]+)"\]$`)
)

func readDockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dockerfileStages(t *testing.T) []string {
	var out []string
	for _, m := range fromRE.FindAllStringSubmatch(readDockerfile(t), -1) {
		out = append(out, m[1])
	}
	return out
}

// The Dockerfile builds with go.mod's Go, static, every binary, one target each with its entrypoint, as
// user 65532 on a distroless base.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	d := readDockerfile(t)
	mod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gv, mv := goVersionRE.FindStringSubmatch(d), goDirectRE.FindSubmatch(mod)
	if gv == nil || mv == nil || gv[1] != string(mv[1]) {
		t.Errorf("Dockerfile's GO_VERSION %v, go.mod's go %s: want them equal", gv, mv)
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER 65532:65532", "FROM gcr.io/distroless/static"} {
		if !strings.Contains(d, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	stages := dockerfileStages(t)
	var entrypoints []string
	for _, m := range entrypointRE.FindAllStringSubmatch(d, -1) {
		entrypoints = append(entrypoints, m[1])
	}
	for binary, pkg := range binaries {
		if !slices.Contains(stages, binary) {
			t.Errorf("Dockerfile has no target %s (stages %v)", binary, stages)
		}
		if !slices.Contains(entrypoints, binary) {
			t.Errorf("Dockerfile has no ENTRYPOINT [\"/usr/local/bin/%s\"]", binary)
		}
		if !regexp.MustCompile(`\s` + regexp.QuoteMeta(pkg) + `(\s|$)`).MatchString(d) {
			t.Errorf("Dockerfile does not build %s", pkg)
		}
	}
	if last := stages[len(stages)-1]; last != "edge" {
		t.Errorf("the Dockerfile's last stage is %s: a build without --target should make the edge", last)
	}
}
