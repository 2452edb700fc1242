package deploytest

import (
	"fmt"
	"net"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/flashgate/flashgate/internal/apidoc"
)

// kustomizations are the folders under deploy/k8s that must render: the base alone, and the example overlay.
var kustomizations = []string{"base", "overlays/example"}

// probePaths are the GET paths each binary answers without a token, by container port name: its public
// listener ("http") and its admin listener ("admin"). edge/internal/api and origin/internal/api route them
// (Server.Public and Server.Admin); TestProbePathsAreDocumented holds this table against docs/API.md.
var probePaths = map[string]map[string][]string{
	"edge":   {"http": {"/healthz", "/readyz"}, "admin": {"/healthz", "/readyz"}},
	"origin": {"http": {"/healthz", "/readyz"}, "admin": {"/healthz", "/readyz"}},
}

// listenEnv names each binary's listener variables by the container port name they must match.
var listenEnv = map[string]map[string]string{
	"edge":   {"http": "FLASHGATE_EDGE_ADDR", "admin": "FLASHGATE_EDGE_ADMIN_ADDR"},
	"origin": {"http": "FLASHGATE_ORIGIN_ADDR", "admin": "FLASHGATE_ORIGIN_ADMIN_ADDR"},
}

// rendered is one kustomization's output, each object decoded into its API type.
type rendered struct {
	dir          string
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	namespaces   map[string]*corev1.Namespace
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	policies     map[string]*networkingv1.NetworkPolicy
}

// workload is a Deployment's or StatefulSet's pod template, by kind/name.
type workload struct {
	name     string
	template *corev1.PodTemplateSpec
}

func (r *rendered) workloads() []workload {
	var out []workload
	for _, n := range sortedKeys(r.deployments) {
		out = append(out, workload{"Deployment/" + n, &r.deployments[n].Spec.Template})
	}
	for _, n := range sortedKeys(r.statefulSets) {
		out = append(out, workload{"StatefulSet/" + n, &r.statefulSets[n].Spec.Template})
	}
	return out
}

// render is deploy/k8s/<dir> built with kustomize, as kubectl apply -k would, every object decoded
// strictly: a field its API type does not have fails the test, as do a kind or apiVersion not listed here.
// Each folder is rendered once per test process; every test that renders it reports its problems.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	v, _ := renders.LoadOrStore(dir, &renderOnce{})
	ro := v.(*renderOnce)
	ro.once.Do(func() { ro.r, ro.problems, ro.fatal = renderDir(dir) })
	for _, p := range ro.problems {
		t.Error(p)
	}
	if ro.fatal != nil {
		t.Fatal(ro.fatal)
	}
	return ro.r
}

type renderOnce struct {
	once     sync.Once
	r        *rendered
	problems []string
	fatal    error
}

var renders sync.Map // dir → *renderOnce

func renderDir(dir string) (*rendered, []string, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), path.Join("..", "k8s", dir))
	if err != nil {
		return nil, nil, fmt.Errorf("kustomize build deploy/k8s/%s: %v", dir, err)
	}
	r := &rendered{
		dir:          dir,
		deployments:  map[string]*appsv1.Deployment{},
		statefulSets: map[string]*appsv1.StatefulSet{},
		services:     map[string]*corev1.Service{},
		configMaps:   map[string]*corev1.ConfigMap{},
		secrets:      map[string]*corev1.Secret{},
		namespaces:   map[string]*corev1.Namespace{},
		hpas:         map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		pdbs:         map[string]*policyv1.PodDisruptionBudget{},
		policies:     map[string]*networkingv1.NetworkPolicy{},
	}
	var problems []string
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", res.CurId(), err)
		}
		kind, version, name := res.GetKind(), res.GetApiVersion(), res.GetName()
		var obj any
		var want string
		switch kind {
		case "Deployment":
			want, obj = "apps/v1", put(r.deployments, name)
		case "StatefulSet":
			want, obj = "apps/v1", put(r.statefulSets, name)
		case "Service":
			want, obj = "v1", put(r.services, name)
		case "ConfigMap":
			want, obj = "v1", put(r.configMaps, name)
		case "Secret":
			want, obj = "v1", put(r.secrets, name)
		case "Namespace":
			want, obj = "v1", put(r.namespaces, name)
		case "HorizontalPodAutoscaler":
			want, obj = "autoscaling/v2", put(r.hpas, name)
		case "PodDisruptionBudget":
			want, obj = "policy/v1", put(r.pdbs, name)
		case "NetworkPolicy":
			want, obj = "networking.k8s.io/v1", put(r.policies, name)
		default:
			problems = append(problems, fmt.Sprintf("deploy/k8s/%s: %s %s: a kind this test does not decode (add its API group)", dir, kind, name))
			continue
		}
		if version != want {
			problems = append(problems, fmt.Sprintf("deploy/k8s/%s: %s %s has apiVersion %q, want %q", dir, kind, name, version, want))
		}
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			problems = append(problems, fmt.Sprintf("deploy/k8s/%s: %s %s does not decode strictly into its API type: %v", dir, kind, name, err))
		}
	}
	return r, problems, nil
}

func put[T any](m map[string]*T, name string) *T {
	v := new(T)
	m[name] = v
	return v
}

func forEachRender(t *testing.T, f func(t *testing.T, r *rendered)) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) { f(t, render(t, dir)) })
	}
}

// The base and the overlay render, and hold the objects an operator relies on.
func TestKustomizeRenders(t *testing.T) {
	t.Parallel()
	forEachRender(t, func(t *testing.T, r *rendered) {
		for _, want := range []struct {
			kind string
			m    any
			name string
		}{
			{"Deployment", r.deployments, "edge"},
			{"Deployment", r.deployments, "origin"},
			{"StatefulSet", r.statefulSets, "redis"},
			{"HorizontalPodAutoscaler", r.hpas, "edge"},
			{"PodDisruptionBudget", r.pdbs, "edge"},
			{"Service", r.services, "edge"},
			{"Service", r.services, "origin"},
			{"Service", r.services, "redis"},
			{"NetworkPolicy", r.policies, "flashgate-default-deny"},
		} {
			if !reflect.ValueOf(want.m).MapIndex(reflect.ValueOf(want.name)).IsValid() {
				t.Errorf("deploy/k8s/%s renders no %s %s", r.dir, want.kind, want.name)
			}
		}
		if h := r.hpas["edge"]; h != nil {
			if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || r.deployments[ref.Name] == nil || ref.Name != "edge" {
				t.Errorf("HPA edge scales %s/%s, want the edge Deployment", ref.Kind, ref.Name)
			}
		}
		for name, pdb := range r.pdbs {
			d := r.deployments[name]
			if d == nil {
				t.Errorf("PodDisruptionBudget %s: no Deployment of that name", name)
				continue
			}
			if !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || len(pdb.Spec.Selector.MatchLabels) == 0 {
				t.Errorf("PodDisruptionBudget %s selects %v, not the pods of Deployment %s (%v)", name, pdb.Spec.Selector.MatchLabels, name, d.Spec.Template.Labels)
			}
		}
	})
}

// The probe table above is what docs/API.md says each binary serves without a token on both listeners.
func TestProbePathsAreDocumented(t *testing.T) {
	t.Parallel()
	doc := apidoc.Read(t, "../../docs/API.md")
	for binary, heading := range map[string]string{"edge": "### Edge admin", "origin": "### Origin admin"} {
		var documented []string
		for _, r := range apidoc.ReadTable(t, doc, heading).PublicToo() {
			documented = append(documented, r.Spelled())
		}
		sort.Strings(documented)
		for port, paths := range probePaths[binary] {
			var want []string
			for _, p := range paths {
				want = append(want, "GET "+p)
			}
			sort.Strings(want)
			if !slices.Equal(want, documented) {
				t.Errorf("%s %s listener: probe paths %v; docs/API.md %q lists %v as also on the public listener", binary, port, want, heading, documented)
			}
		}
	}
}

// Every probe points at a port its container declares and, for HTTP, at a path the binary serves there.
func TestKubernetesProbes(t *testing.T) {
	t.Parallel()
	forEachRender(t, func(t *testing.T, r *rendered) {
		for _, w := range r.workloads() {
			for _, c := range containers(w.template) {
				probes := map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe}
				if _, ok := probePaths[c.Name]; ok && (c.ReadinessProbe == nil || c.LivenessProbe == nil) {
					t.Errorf("%s container %s: wants a readiness and a liveness probe", w.name, c.Name)
				}
				for kind, p := range probes {
					if p == nil {
						continue
					}
					where := fmt.Sprintf("%s container %s %s", w.name, c.Name, kind)
					switch {
					case p.HTTPGet != nil:
						port, ok := declaredPort(c, p.HTTPGet.Port)
						if !ok {
							t.Errorf("%s: port %s is not one the container declares", where, p.HTTPGet.Port.String())
							continue
						}
						paths, known := probePaths[c.Name][port.Name]
						if !known {
							t.Errorf("%s: HTTP probe on port %s of a container whose paths this test does not know", where, port.Name)
						} else if !slices.Contains(paths, p.HTTPGet.Path) {
							t.Errorf("%s: GET %s on port %s; %s serves %v there", where, p.HTTPGet.Path, port.Name, c.Name, paths)
						}
					case p.TCPSocket != nil:
						if _, ok := declaredPort(c, p.TCPSocket.Port); !ok {
							t.Errorf("%s: port %s is not one the container declares", where, p.TCPSocket.Port.String())
						}
					case p.Exec != nil:
						if _, ok := probePaths[c.Name]; ok {
							t.Errorf("%s: an exec probe, but the image has no shell: probe over HTTP", where)
						}
					default:
						t.Errorf("%s: no handler", where)
					}
				}
			}
		}
	})
}

// Every environment variable the edge and origin containers get, from env or from their ConfigMaps, is one
// the binary reads (its -h output); each _FILE names a file a Secret volume mounts; the listeners are the
// ports the container declares, the admin ones on every interface (in-cluster, guarded by NetworkPolicy).
func TestKubernetesEnvironment(t *testing.T) {
	t.Parallel()
	forEachRender(t, func(t *testing.T, r *rendered) {
		for _, w := range r.workloads() {
			for _, c := range containers(w.template) {
				where := fmt.Sprintf("%s container %s", w.name, c.Name)
				env := containerEnv(t, r, where, c)
				_, flashgate := probePaths[c.Name]
				if !flashgate {
					for name := range env {
						if strings.HasPrefix(name, "FLASHGATE_") {
							t.Errorf("%s: sets %s, but runs no flashgate binary", where, name)
						}
					}
					continue
				}
				known := binaryEnv(t, c.Name)
				for _, name := range sortedKeys(env) {
					if !known[name] {
						t.Errorf("%s: %s is no variable of %s (-h)", where, name, c.Name)
					}
					if base, ok := strings.CutSuffix(name, "_FILE"); ok && known[name] {
						if env[base] != "" {
							t.Errorf("%s: sets both %s and %s", where, base, name)
						}
						if !mountedSecretFile(w.template, c, env[name]) {
							t.Errorf("%s: %s=%s is no file a Secret volume mounts with that key", where, name, env[name])
						}
					}
				}
				for portName, variable := range listenEnv[c.Name] {
					addr, ok := env[variable]
					if !ok {
						t.Errorf("%s: %s is not set", where, variable)
						continue
					}
					host, portStr, err := net.SplitHostPort(addr)
					if err != nil {
						t.Errorf("%s: %s=%q: %v", where, variable, addr, err)
						continue
					}
					port, ok := declaredPort(c, intstr.FromString(portName))
					if !ok || fmt.Sprint(port.ContainerPort) != portStr {
						t.Errorf("%s: %s=%q, but the container's port %q is %d", where, variable, addr, portName, port.ContainerPort)
					}
					if portName == "admin" && host != "0.0.0.0" {
						t.Errorf("%s: %s=%q: in a pod the admin listener must listen on 0.0.0.0 (the default, 127.0.0.1, is unreachable)", where, variable, addr)
					}
				}
				for _, secret := range []string{"FLASHGATE_TOKEN_KEYS", "FLASHGATE_USER_TOKEN_SECRET", "FLASHGATE_REDIS_URL", "FLASHGATE_EDGE_ADMIN_TOKEN", "FLASHGATE_ORIGIN_ADMIN_TOKEN", "FLASHGATE_POSTGRES_URL", "FLASHGATE_GATEWAY_API_KEY", "FLASHGATE_GATEWAY_WEBHOOK_SECRET"} {
					if _, ok := env[secret]; ok {
						t.Errorf("%s: %s in the environment; mount it from a Secret and set %s_FILE", where, secret, secret)
					}
				}
			}
		}
	})
}

// Every pod runs as non-root on a read-only root filesystem, without privilege escalation or capabilities,
// and every container asks for CPU and memory and has a memory limit.
func TestKubernetesSecurityAndResources(t *testing.T) {
	t.Parallel()
	forEachRender(t, func(t *testing.T, r *rendered) {
		for _, w := range r.workloads() {
			ps := w.template.Spec.SecurityContext
			if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
				t.Errorf("%s: the pod's securityContext must set runAsNonRoot and a non-zero runAsUser", w.name)
			}
			if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: the pod's seccompProfile must be RuntimeDefault", w.name)
			}
			if a := w.template.Spec.AutomountServiceAccountToken; a == nil || *a {
				t.Errorf("%s: automountServiceAccountToken must be false (nothing here talks to the API server)", w.name)
			}
			for _, c := range containers(w.template) {
				where := fmt.Sprintf("%s container %s", w.name, c.Name)
				sc := c.SecurityContext
				switch {
				case sc == nil:
					t.Errorf("%s: no securityContext", where)
					continue
				case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
					t.Errorf("%s: readOnlyRootFilesystem must be true", where)
				case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
					t.Errorf("%s: allowPrivilegeEscalation must be false", where)
				case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
					t.Errorf("%s: capabilities must drop ALL and add none", where)
				}
				req, lim := c.Resources.Requests, c.Resources.Limits
				if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
					t.Errorf("%s: wants CPU and memory requests and a memory limit, has requests %v limits %v", where, req, lim)
				}
			}
		}
	})
}

// In the overlay, which provides the Secrets, everything a pod or Service refers to exists: ConfigMaps,
// Secrets and their keys, the pods a Service selects and the ports it targets.
func TestKubernetesReferences(t *testing.T) {
	t.Parallel()
	r := render(t, "overlays/example")
	for _, w := range r.workloads() {
		for _, v := range w.template.Spec.Volumes {
			switch {
			case v.Secret != nil:
				s := r.secrets[v.Secret.SecretName]
				if s == nil {
					t.Errorf("%s volume %s: no Secret %s", w.name, v.Name, v.Secret.SecretName)
					continue
				}
				for _, item := range v.Secret.Items {
					if _, ok := s.Data[item.Key]; !ok {
						t.Errorf("%s volume %s: Secret %s has no key %s (has %v)", w.name, v.Name, v.Secret.SecretName, item.Key, sortedKeys(s.Data))
					}
				}
			case v.ConfigMap != nil:
				if r.configMaps[v.ConfigMap.Name] == nil {
					t.Errorf("%s volume %s: no ConfigMap %s", w.name, v.Name, v.ConfigMap.Name)
				}
			}
		}
	}
	for name, s := range r.services {
		var matched []workload
		for _, w := range r.workloads() {
			if selects(s.Spec.Selector, w.template.Labels) {
				matched = append(matched, w)
			}
		}
		if len(s.Spec.Selector) == 0 || len(matched) == 0 {
			t.Errorf("Service %s selects %v: no workload's pods", name, s.Spec.Selector)
			continue
		}
		for _, p := range s.Spec.Ports {
			for _, w := range matched {
				found := false
				for _, c := range w.template.Spec.Containers {
					if _, ok := declaredPort(c, p.TargetPort); ok {
						found = true
					}
				}
				if !found {
					t.Errorf("Service %s port %s targets %s, which %s does not declare", name, p.Name, p.TargetPort.String(), w.name)
				}
			}
		}
	}
	if ns := r.namespaces["flashgate"]; ns == nil {
		t.Errorf("the overlay makes no Namespace flashgate")
	}
}

// The NetworkPolicies let only the edges reach the origins' public port and only the "ops" namespace reach
// either admin listener, and nothing reaches a flashgate pod's port that no policy names.
func TestKubernetesNetworkPolicies(t *testing.T) {
	t.Parallel()
	r := render(t, "base")
	ops := "namespace kubernetes.io/metadata.name=ops"
	edges := "pods app.kubernetes.io/component=edge,app.kubernetes.io/name=flashgate"
	want := map[string]map[string][]string{ // component → container port → who may reach it
		"edge":   {"http": {"anyone"}, "admin": {ops}},
		"origin": {"http": {edges}, "admin": {ops}},
	}
	deny := r.policies["flashgate-default-deny"]
	if deny == nil || len(deny.Spec.Ingress) != 0 || !slices.Contains(deny.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Fatalf("flashgate-default-deny must be an Ingress policy with no rules")
	}
	for _, w := range r.workloads() {
		labels := w.template.Labels
		if !selects(deny.Spec.PodSelector.MatchLabels, labels) {
			t.Errorf("%s: not under flashgate-default-deny", w.name)
		}
		allowed := map[int32][]string{}
		for _, name := range sortedKeys(r.policies) {
			p := r.policies[name]
			if !selects(p.Spec.PodSelector.MatchLabels, labels) || len(p.Spec.PodSelector.MatchExpressions) > 0 {
				continue
			}
			for _, rule := range p.Spec.Ingress {
				if len(rule.Ports) == 0 {
					t.Errorf("NetworkPolicy %s: a rule without ports opens every port of %s", name, w.name)
				}
				peers := []string{"anyone"}
				if len(rule.From) > 0 {
					peers = nil
					for _, f := range rule.From {
						peers = append(peers, describePeer(f))
					}
				}
				for _, port := range rule.Ports {
					if port.Port == nil || port.Port.Type != intstr.Int {
						t.Errorf("NetworkPolicy %s: give ports by number (%v)", name, port.Port)
						continue
					}
					allowed[port.Port.IntVal] = append(allowed[port.Port.IntVal], peers...)
				}
			}
		}
		byName := want[labels["app.kubernetes.io/component"]]
		for _, c := range w.template.Spec.Containers {
			for _, cp := range c.Ports {
				got := allowed[cp.ContainerPort]
				if len(got) == 0 {
					t.Errorf("%s container %s port %s (%d): no policy lets anything reach it", w.name, c.Name, cp.Name, cp.ContainerPort)
				}
				if exp, ok := byName[cp.Name]; ok && !slices.Equal(got, exp) {
					t.Errorf("%s container %s port %s (%d) reachable by %v, want %v", w.name, c.Name, cp.Name, cp.ContainerPort, got, exp)
				}
				delete(allowed, cp.ContainerPort)
			}
		}
		for port, peers := range allowed {
			t.Errorf("%s: policies open port %d (to %v), which no container declares", w.name, port, peers)
		}
	}
}

func describePeer(p networkingv1.NetworkPolicyPeer) string {
	var parts []string
	if p.NamespaceSelector != nil {
		parts = append(parts, "namespace "+labelString(p.NamespaceSelector.MatchLabels))
	}
	if p.PodSelector != nil {
		s := labelString(p.PodSelector.MatchLabels)
		for _, e := range p.PodSelector.MatchExpressions {
			s += fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values)
		}
		parts = append(parts, "pods "+s)
	}
	if p.IPBlock != nil {
		parts = append(parts, "ipBlock "+p.IPBlock.CIDR)
	}
	return strings.Join(parts, " and ")
}

func labelString(m map[string]string) string {
	var out []string
	for _, k := range sortedKeys(m) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}

func containers(t *corev1.PodTemplateSpec) []corev1.Container {
	return append(slices.Clone(t.Spec.InitContainers), t.Spec.Containers...)
}

// declaredPort is the container's port that p names, by name or number.
func declaredPort(c corev1.Container, p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// containerEnv is the container's environment: its ConfigMaps' keys (envFrom, in order), then env. A value
// from a field or a Secret key reads as "(ref)".
func containerEnv(t *testing.T, r *rendered, where string, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm := r.configMaps[from.ConfigMapRef.Name]
			if cm == nil {
				t.Errorf("%s: envFrom names no ConfigMap of the render: %s", where, from.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		default:
			t.Errorf("%s: envFrom other than a ConfigMap (secrets come as files)", where)
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = "(ref)"
		}
	}
	return env
}

// mountedSecretFile says whether file is a key of a Secret volume that c mounts, at the path it mounts.
func mountedSecretFile(t *corev1.PodTemplateSpec, c corev1.Container, file string) bool {
	_, _, ok := secretFileSource(t, c, file)
	return ok
}

// secretFileSource is the Secret and key whose value c reads at file, through a Secret volume it mounts.
func secretFileSource(t *corev1.PodTemplateSpec, c corev1.Container, file string) (secret, key string, ok bool) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range t.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, item := range v.Secret.Items {
				if item.Path == rel {
					return v.Secret.SecretName, item.Key, true
				}
			}
		}
	}
	return "", "", false
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
