// Command imagebuild is make image: the container images of edge, origin and the sandbox gateway, built
// without a Docker daemon (go-containerregistry), the same images deploy/docker/Dockerfile builds with one.
//
// One image per binary, flashgate-<binary>:<tag>, each two layers: a base shared by all three (/etc/passwd
// and /etc/group with the nonroot user 65532, the build machine's CA certificates, an empty /tmp) and the
// static binary (CGO_ENABLED=0) at /usr/local/bin/<binary>, its entrypoint, run as 65532:65532. Files are
// dated 1970-01-01, so a build of the same sources is the same image. Written under -out (bin/image):
//
//	oci/                  an OCI image layout holding all three (skopeo copy oci:bin/image/oci:flashgate-edge:dev ...)
//	flashgate-images.tar  the same images for docker load -i (or podman load -i)
//
// Usage: go run ./deploy/imagebuild [-out bin/image] [-tag dev] [-arch amd64] [-bin dir-of-linux-binaries]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

// stdio is where run writes: progress and the summary to out, go build's output to errOut.
type stdio struct{ out, errOut io.Writer }
