// Package deploytest holds the tests of the deploy files an operator uses: the Kubernetes manifests under
// deploy/k8s (rendered with kustomize, every object decoded strictly into its API type, probes, ports,
// environment names, Secrets, NetworkPolicies in and out, the Redis users and the Sentinels' password;
// redis-init.sh run against a real redis-server and Sentinel, the edges' Redis user held against the
// commands the edge sends) and the Docker files under deploy/docker (the Dockerfile's
// stages; the compose file's services, environment, ports and dependencies, and the file loaded with
// compose-go). It has no code of its own.
package deploytest
