package deploytest

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// egressPeer is one (peer, port) a pod's egress policies let it reach.
type egressPeer struct {
	policy string
	peer   networkingv1.NetworkPolicyPeer
	port   int32
	proto  corev1.Protocol
}

func (e egressPeer) String() string {
	return fmt.Sprintf("%s %d/%s (NetworkPolicy %s)", describePeer(e.peer), e.port, e.proto, e.policy)
}

// destination is something a pod's settings say it talks to, and which egressPeers lead there.
type destination struct {
	what    string
	reaches func(egressPeer) bool
}

// dnsPeer is the cluster's DNS as the policies name it.
func dnsPeer(proto corev1.Protocol) destination {
	return destination{"the cluster's DNS (53/" + string(proto) + ")", func(e egressPeer) bool {
		return e.port == 53 && e.proto == proto && e.peer.NamespaceSelector != nil && e.peer.PodSelector != nil &&
			e.peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "kube-system" &&
			e.peer.PodSelector.MatchLabels["k8s-app"] == "kube-dns"
	}}
}

// podsOf is the destination of port on the pods behind Service svc of the render: a peer selecting those
// pods (in the pod's own namespace), on the container port the Service port targets.
func podsOf(t *testing.T, r *rendered, what, svc string, port int32) destination {
	t.Helper()
	s := r.services[svc]
	if s == nil {
		t.Fatalf("%s: no Service %s in the render", what, svc)
	}
	var target intstr.IntOrString
	for _, p := range s.Spec.Ports {
		if p.Port == port {
			target = p.TargetPort
		}
	}
	var podLabels map[string]string
	var containerPort int32
	for _, w := range r.workloads() {
		if !selects(s.Spec.Selector, w.template.Labels) {
			continue
		}
		podLabels = w.template.Labels
		for _, c := range w.template.Spec.Containers {
			if cp, ok := declaredPort(c, target); ok {
				containerPort = cp.ContainerPort
			}
		}
	}
	if containerPort == 0 {
		t.Fatalf("%s: Service %s has no port %d that a container of its pods declares", what, svc, port)
	}
	return destination{fmt.Sprintf("%s (Service %s, pods' port %d)", what, svc, containerPort), func(e egressPeer) bool {
		return e.port == containerPort && e.proto == corev1.ProtocolTCP && e.peer.NamespaceSelector == nil && e.peer.IPBlock == nil &&
			e.peer.PodSelector != nil && len(e.peer.PodSelector.MatchLabels) > 0 && len(e.peer.PodSelector.MatchExpressions) == 0 &&
			selects(e.peer.PodSelector.MatchLabels, podLabels)
	}}
}

// addrDestination is the destination of host:port as a binary dials it: a Service of the render (by its
// name, or a pod's name under a headless one: redis-0.redis), another namespace's Service
// (<name>.<namespace>.svc...), or an address outside the cluster, which only an ipBlock reaches.
func addrDestination(t *testing.T, r *rendered, what, host string, port int32) destination {
	t.Helper()
	labels := strings.Split(host, ".")
	name, rest := labels[0], labels[1:]
	if r.services[name] == nil && len(rest) > 0 && r.services[rest[0]] != nil {
		name, rest = rest[0], rest[1:] // a pod of a headless Service
	}
	inNamespace := len(rest) >= 2 && rest[1] == "svc"
	switch {
	case inNamespace && rest[0] != renderNamespace(r):
		ns := rest[0]
		return destination{fmt.Sprintf("%s (namespace %s, port %d)", what, ns, port), func(e egressPeer) bool {
			return e.port == port && e.proto == corev1.ProtocolTCP && e.peer.NamespaceSelector != nil &&
				e.peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == ns
		}}
	case r.services[name] != nil && (len(rest) == 0 || inNamespace):
		return podsOf(t, r, what, name, port)
	}
	return external(what, port)
}

// renderNamespace is the namespace the render puts its workloads in ("" for the base).
func renderNamespace(r *rendered) string {
	for _, d := range r.deployments {
		return d.Namespace
	}
	return ""
}

// external is a destination outside the cluster on port: an ipBlock reaches it.
func external(what string, port int32) destination {
	return destination{fmt.Sprintf("%s (outside the cluster, port %d)", what, port), func(e egressPeer) bool {
		return e.port == port && e.proto == corev1.ProtocolTCP && e.peer.IPBlock != nil
	}}
}

func urlDestination(t *testing.T, r *rendered, what, raw string) destination {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		t.Fatalf("%s %q is not a URL with a host", what, raw)
	}
	port := map[string]int32{"http": 80, "https": 443}[u.Scheme]
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		port = int32(n)
	}
	return addrDestination(t, r, what, u.Hostname(), port)
}

// destinations are what the pods of w talk to, from their settings: the cluster's DNS always; for the
// binaries the Sentinels and the primary they name, the origins (edges), the shop's upstream (edges, when
// set), Postgres and the payment gateway (origins); for Redis its own pods' ports.
func destinations(t *testing.T, r *rendered, w workload) []destination {
	t.Helper()
	out := []destination{dnsPeer(corev1.ProtocolUDP), dnsPeer(corev1.ProtocolTCP)}
	switch w.template.Labels["app.kubernetes.io/component"] {
	case "redis":
		for _, p := range r.services["redis"].Spec.Ports {
			out = append(out, podsOf(t, r, "the other Redis pods' "+p.Name, "redis", p.Port))
		}
		return out
	case "edge", "origin":
	default:
		t.Fatalf("%s: a component this test does not know", w.name)
	}
	c := w.template.Spec.Containers[0]
	env := containerEnv(t, r, w.name, c)
	if list := env["FLASHGATE_REDIS_SENTINELS"]; list != "" {
		for _, addr := range strings.Split(list, ",") {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatalf("FLASHGATE_REDIS_SENTINELS %q: %v", list, err)
			}
			n, _ := strconv.Atoi(port)
			out = append(out, addrDestination(t, r, "the Sentinel "+addr, host, int32(n)))
		}
		// The Sentinels name the primary by its pod's name, at the Redis port of the Service they announce.
		out = append(out, podsOf(t, r, "the Redis primary the Sentinels name", "redis", 6379))
	}
	switch c.Name {
	case "edge":
		out = append(out, urlDestination(t, r, "FLASHGATE_ORIGIN_URL", env["FLASHGATE_ORIGIN_URL"]))
		if shop := env["FLASHGATE_SHOP_URL"]; shop != "" {
			out = append(out, urlDestination(t, r, "FLASHGATE_SHOP_URL", shop))
		}
	case "origin":
		// postgres-url is a Secret: the managed Postgres, outside the cluster, on its usual port.
		out = append(out, external("Postgres (postgres-url)", 5432))
		gateway := env["FLASHGATE_GATEWAY_URL"]
		if gateway == "" {
			gateway = "https://gateway.invalid" // the base leaves it to the overlay: HTTPS outside
		}
		out = append(out, urlDestination(t, r, "FLASHGATE_GATEWAY_URL", gateway))
	}
	return out
}

// Every flashgate pod is denied egress unless a policy lets it, and the policies let each reach what its
// settings say it talks to and nothing else: the edges Redis, its Sentinels, the origins and the shop's
// upstream; the origins Redis, its Sentinels, Postgres and the payment gateway; Redis its own pods; all of
// them the cluster's DNS. No egress rule leaves its peers or ports open.
func TestKubernetesEgress(t *testing.T) {
	t.Parallel()
	forEachRender(t, func(t *testing.T, r *rendered) {
		deny := r.policies["flashgate-default-deny"]
		if deny == nil || len(deny.Spec.Egress) != 0 || !slices.Contains(deny.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Fatalf("flashgate-default-deny must be an Egress (and Ingress) policy with no rules")
		}
		for _, w := range r.workloads() {
			labels := w.template.Labels
			if !selects(deny.Spec.PodSelector.MatchLabels, labels) {
				t.Errorf("%s: not under flashgate-default-deny", w.name)
			}
			var allowed []egressPeer
			for _, name := range sortedKeys(r.policies) {
				p := r.policies[name]
				if !selects(p.Spec.PodSelector.MatchLabels, labels) || len(p.Spec.PodSelector.MatchExpressions) > 0 {
					continue
				}
				if len(p.Spec.Egress) > 0 && !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
					t.Errorf("NetworkPolicy %s has egress rules but not the Egress policy type", name)
				}
				for _, rule := range p.Spec.Egress {
					if len(rule.To) == 0 {
						t.Errorf("NetworkPolicy %s: an egress rule without peers lets %s reach any address", name, w.name)
					}
					if len(rule.Ports) == 0 {
						t.Errorf("NetworkPolicy %s: an egress rule without ports lets %s reach every port", name, w.name)
					}
					for _, port := range rule.Ports {
						if port.Port == nil || port.Port.Type != intstr.Int || port.EndPort != nil {
							t.Errorf("NetworkPolicy %s: give egress ports by number, one each (%v)", name, port.Port)
							continue
						}
						proto := corev1.ProtocolTCP
						if port.Protocol != nil {
							proto = *port.Protocol
						}
						for _, peer := range rule.To {
							allowed = append(allowed, egressPeer{name, peer, port.Port.IntVal, proto})
						}
					}
				}
			}
			dests := destinations(t, r, w)
			for _, d := range dests {
				if !slices.ContainsFunc(allowed, d.reaches) {
					t.Errorf("%s cannot reach %s: no egress policy lets it", w.name, d.what)
				}
			}
			for _, e := range allowed {
				if !slices.ContainsFunc(dests, func(d destination) bool { return d.reaches(e) }) {
					t.Errorf("%s may reach %s, which none of its settings names", w.name, e)
				}
			}
		}
	})
}
