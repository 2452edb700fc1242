package deploytest

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// generatedSuffix is the hash kustomize appends to a generated Secret's or ConfigMap's name.
var generatedSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

// baseName is a Secret's name as the manifests write it, without the hash a generator gave it.
func baseName(name string) string { return generatedSuffix.ReplaceAllString(name, "") }

// source is where a file a container reads comes from: a Secret (by its base name) and key.
type source struct{ secret, key string }

func (s source) String() string { return s.secret + "/" + s.key }

// fileSource is the source of file in container c of w, failing t when no Secret volume c mounts holds it.
func fileSource(t *testing.T, w workload, c corev1.Container, file string) source {
	t.Helper()
	secret, key, ok := secretFileSource(w.template, c, file)
	if !ok {
		t.Errorf("%s container %s: %s is no file a Secret volume mounts", w.name, c.Name, file)
	}
	return source{baseName(secret), key}
}

// findContainer is the container (or init container) of w named name.
func findContainer(t *testing.T, w workload, name string) corev1.Container {
	t.Helper()
	for _, c := range containers(w.template) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s has no container %s", w.name, name)
	return corev1.Container{}
}

func findWorkload(t *testing.T, r *rendered, name string) workload {
	t.Helper()
	for _, w := range r.workloads() {
		if w.name == name {
			return w
		}
	}
	t.Fatalf("deploy/k8s/%s renders no %s", r.dir, name)
	return workload{}
}

// Where the Redis pods' init container reads each password (deploy/k8s/base/redis-init.sh).
const (
	initRedisPassword    = "/run/secrets/redis/redis-password"
	initSentinelPassword = "/run/secrets/redis/sentinel-password"
	initEdgePassword     = "/run/secrets/redis-edge/password"
)

// The edges reach Redis as a user of their own: their Redis URL comes from the Secret that also gives the
// Redis pods that user's password, never the origins' URL or the default user's password (no edge pod
// mounts them); the Redis pods get the user's rules (redis-edge.acl, as on disk) and the key prefix the
// binaries use, from the same ConfigMap.
func TestKubernetesRedisUsers(t *testing.T) {
	t.Parallel()
	acl, err := os.ReadFile("../k8s/base/redis-edge.acl")
	if err != nil {
		t.Fatal(err)
	}
	forEachRender(t, func(t *testing.T, r *rendered) {
		redisPods := findWorkload(t, r, "StatefulSet/redis")
		initC := findContainer(t, redisPods, "config")
		edgePods, originPods := findWorkload(t, r, "Deployment/edge"), findWorkload(t, r, "Deployment/origin")
		edge, origin := findContainer(t, edgePods, "edge"), findContainer(t, originPods, "origin")
		edgeEnv := containerEnv(t, r, "edge", edge)
		originEnv := containerEnv(t, r, "origin", origin)

		edgeURL := fileSource(t, edgePods, edge, edgeEnv["FLASHGATE_REDIS_URL_FILE"])
		originURL := fileSource(t, originPods, origin, originEnv["FLASHGATE_REDIS_URL_FILE"])
		edgePassword := fileSource(t, redisPods, initC, initEdgePassword)
		defaultPassword := fileSource(t, redisPods, initC, initRedisPassword)
		if edgeURL.secret != edgePassword.secret || edgeURL.secret == originURL.secret || edgePassword.secret == defaultPassword.secret {
			t.Errorf("the edges' Redis URL comes from %v and their user's password from %v; the origins' URL from %v, the default user's password from %v: want the edges' URL and password in a Secret of their own",
				edgeURL, edgePassword, originURL, defaultPassword)
		}
		for _, v := range edgePods.template.Spec.Volumes {
			if v.Secret == nil || baseName(v.Secret.SecretName) != originURL.secret {
				continue
			}
			for _, item := range v.Secret.Items {
				if item.Key == originURL.key || item.Key == defaultPassword.key {
					t.Errorf("Deployment/edge volume %s mounts %s/%s: the origins' Redis URL or the default user's password", v.Name, originURL.secret, item.Key)
				}
			}
		}

		// The prefix: the binaries' FLASHGATE_REDIS_PREFIX, from the ConfigMap they read it from.
		var ref *corev1.ConfigMapKeySelector
		for _, e := range initC.Env {
			if e.Name == "KEY_PREFIX" && e.ValueFrom != nil {
				ref = e.ValueFrom.ConfigMapKeyRef
			}
		}
		if ref == nil || ref.Key != "FLASHGATE_REDIS_PREFIX" || r.configMaps[ref.Name] == nil {
			t.Errorf("StatefulSet/redis container config: KEY_PREFIX must come from the binaries' ConfigMap, key FLASHGATE_REDIS_PREFIX (got %+v)", ref)
		} else {
			prefix, ok := r.configMaps[ref.Name].Data["FLASHGATE_REDIS_PREFIX"]
			if !ok || prefix != edgeEnv["FLASHGATE_REDIS_PREFIX"] || prefix != originEnv["FLASHGATE_REDIS_PREFIX"] {
				t.Errorf("KEY_PREFIX is %q (ConfigMap %s); the edges' FLASHGATE_REDIS_PREFIX %q, the origins' %q: want one prefix", prefix, ref.Name, edgeEnv["FLASHGATE_REDIS_PREFIX"], originEnv["FLASHGATE_REDIS_PREFIX"])
			}
		}

		// The rules: /scripts/redis-edge.acl is the file on disk.
		found := false
		for _, v := range redisPods.template.Spec.Volumes {
			if v.ConfigMap == nil || !slices.ContainsFunc(initC.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name && m.MountPath == "/scripts" }) {
				continue
			}
			cm := r.configMaps[v.ConfigMap.Name]
			if cm == nil {
				continue
			}
			found = true
			if cm.Data["redis-edge.acl"] != string(acl) || cm.Data["redis-init.sh"] == "" {
				t.Errorf("ConfigMap %s mounted at /scripts: want redis-init.sh and redis-edge.acl as in deploy/k8s/base", cm.Name)
			}
		}
		if !found {
			t.Errorf("StatefulSet/redis container config mounts no ConfigMap at /scripts")
		}
	})
}

// Where the manifests use Sentinels, the Sentinels require a password (redis-init.sh writes requirepass and
// refuses to start without one: TestRedisInitScript, TestRedisInitScriptRefuses), and every binary that
// follows them is given that same password (FLASHGATE_REDIS_SENTINEL_PASSWORD_FILE, from the Secret key the
// Redis pods read it from).
func TestKubernetesSentinelPassword(t *testing.T) {
	t.Parallel()
	forEachRender(t, func(t *testing.T, r *rendered) {
		var sentinelPassword source
		if ss := r.statefulSets["redis"]; ss != nil {
			w := findWorkload(t, r, "StatefulSet/redis")
			sentinelPassword = fileSource(t, w, findContainer(t, w, "config"), initSentinelPassword)
		}
		users := 0
		for _, w := range r.workloads() {
			for _, c := range containers(w.template) {
				if _, ok := probePaths[c.Name]; !ok {
					continue
				}
				where := fmt.Sprintf("%s container %s", w.name, c.Name)
				env := containerEnv(t, r, where, c)
				if env["FLASHGATE_REDIS_SENTINELS"] == "" {
					continue
				}
				users++
				file, ok := env["FLASHGATE_REDIS_SENTINEL_PASSWORD_FILE"]
				if !ok {
					t.Errorf("%s follows the Sentinels (%s) without their password: set FLASHGATE_REDIS_SENTINEL_PASSWORD_FILE", where, env["FLASHGATE_REDIS_SENTINELS"])
					continue
				}
				if got := fileSource(t, w, c, file); sentinelPassword != (source{}) && got != sentinelPassword {
					t.Errorf("%s reads the Sentinels' password from %v, but the Sentinels are given %v", where, got, sentinelPassword)
				}
			}
		}
		if users == 0 {
			t.Errorf("deploy/k8s/%s: no binary follows Sentinels; this test checks nothing", r.dir)
		}
	})
}
