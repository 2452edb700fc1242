package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/flashgate/flashgate/internal/gowork"
)

// imageSpec is one image: the binary it runs and the ports it listens on by default (docs/API.md "Ports").
type imageSpec struct {
	binary string   // also the image's name after "flashgate-"
	pkg    string   // from the repository root
	ports  []string // EXPOSE, documentation only
}

var imageSpecs = []imageSpec{
	{"edge", "./edge", []string{"8080/tcp", "8081/tcp"}},
	{"origin", "./origin", []string{"9090/tcp", "9091/tcp"}},
	{"sandboxgateway", "./deploy/sandboxgateway", []string{"9300/tcp"}},
}

const (
	// nonroot is the user every image runs as, distroless's nonroot, as in deploy/docker/Dockerfile.
	nonroot = "65532:65532"
	binDir  = "/usr/local/bin"
	// refNameAnnotation names each image in the OCI layout's index.
	refNameAnnotation = "org.opencontainers.image.ref.name"
	tarballName       = "flashgate-images.tar"
)

// epoch dates every file and the images, so that the same sources make the same images.
var epoch = time.Unix(0, 0).UTC()

// caBundles are where Linux distributions keep the CA bundle; the first found goes into the base layer as
// /etc/ssl/certs/ca-certificates.crt, which Go's crypto/x509 reads.
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// options are run's flags.
type options struct {
	out    string // folder of the OCI layout and the tarball
	tag    string
	arch   string // GOARCH of the binaries and the images
	bin    string // folder of prebuilt linux binaries named as imageSpecs; empty: build them
	caFile string // the CA bundle to include; empty: the first of caBundles found, none if none is
}

// built is one image as written.
type built struct {
	ref    string
	image  v1.Image
	digest v1.Hash
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := options{}
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.out, "out", filepath.Join("bin", "image"), "output folder: oci/ (an OCI layout) and "+tarballName+" (docker load)")
	fs.StringVar(&o.tag, "tag", "dev", "tag of every image: flashgate-<binary>:<tag>")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the binaries and the images (GOOS is linux)")
	fs.StringVar(&o.bin, "bin", "", "folder of prebuilt static linux binaries edge, origin, sandboxgateway (empty: go build them)")
	fs.StringVar(&o.caFile, "ca-file", "", "CA bundle for /etc/ssl/certs/ca-certificates.crt (empty: the build machine's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	images, err := build(ctx, o, stdio{stdout, stderr})
	if err != nil {
		return err
	}
	for _, b := range images {
		fmt.Fprintf(stdout, "imagebuild: %s %s\n", b.ref, b.digest)
	}
	fmt.Fprintf(stdout, "imagebuild: wrote %s (OCI layout) and %s (docker load -i)\n",
		filepath.Join(o.out, "oci"), filepath.Join(o.out, tarballName))
	return nil
}

// build makes the images and writes them under o.out, replacing what an earlier build left there.
func build(ctx context.Context, o options, w stdio) ([]built, error) {
	bins := o.bin
	if bins == "" {
		tmp, err := os.MkdirTemp("", "imagebuild-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := goBuild(ctx, tmp, o.arch, w); err != nil {
			return nil, err
		}
		bins = tmp
	}
	base, err := baseLayer(o.caFile)
	if err != nil {
		return nil, err
	}
	var images []built
	for _, spec := range imageSpecs {
		img, err := image(spec, o.arch, base, filepath.Join(bins, spec.binary))
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.binary, err)
		}
		d, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.binary, err)
		}
		images = append(images, built{ref: "flashgate-" + spec.binary + ":" + o.tag, image: img, digest: d})
	}
	if err := writeLayout(filepath.Join(o.out, "oci"), images); err != nil {
		return nil, err
	}
	if err := writeTarball(filepath.Join(o.out, tarballName), images); err != nil {
		return nil, err
	}
	return images, nil
}

// goBuild builds every image's binary, static, for linux/arch, into dir, from the repository that holds the
// current folder.
func goBuild(ctx context.Context, dir, arch string, w stdio) error {
	root, err := gowork.Root(ctx)
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + string(os.PathSeparator)}
	for _, s := range imageSpecs {
		args = append(args, s.pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = w.errOut, w.errOut
	fmt.Fprintf(w.out, "imagebuild: CGO_ENABLED=0 GOOS=linux GOARCH=%s go %s\n", arch, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// image is spec's image: the base layer, then its binary's.
func image(spec imageSpec, arch string, base v1.Layer, binary string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%s is not a Linux (ELF) binary", binary)
	}
	entry := binDir + "/" + spec.binary
	binLayer, err := layer([]file{{name: strings.TrimPrefix(entry, "/"), mode: 0o755, body: bin}})
	if err != nil {
		return nil, err
	}
	ports := map[string]struct{}{}
	for _, p := range spec.ports {
		ports[p] = struct{}{}
	}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			User:         nonroot,
			Entrypoint:   []string{entry},
			Env:          []string{"PATH=" + binDir + ":/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			WorkingDir:   "/",
			ExposedPorts: ports,
			Labels: map[string]string{
				"org.opencontainers.image.title":       "flashgate-" + spec.binary,
				"org.opencontainers.image.description": "flashgate " + spec.binary + " (deploy/imagebuild)",
				"org.opencontainers.image.source":      "https://github.com/flashgate/flashgate",
			},
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "imagebuild: /etc/passwd, /etc/group, CA certificates, /tmp"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "imagebuild: " + entry}},
	)
}

// baseLayer holds the user the images run as, the CA certificates and /tmp.
func baseLayer(caFile string) (v1.Layer, error) {
	files := []file{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: 65532},
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/local/", dir: true, mode: 0o755},
		{name: "usr/local/bin/", dir: true, mode: 0o755},
	}
	if caFile == "" {
		for _, c := range caBundles {
			if _, err := os.Stat(c); err == nil {
				caFile = c
				break
			}
		}
	}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		files = append(files,
			file{name: "etc/ssl/", dir: true, mode: 0o755},
			file{name: "etc/ssl/certs/", dir: true, mode: 0o755},
			file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca})
	}
	return layer(files)
}

// file is one entry of a layer, owned by root unless uid says otherwise.
type file struct {
	name string
	dir  bool
	mode int64
	uid  int
	body []byte
}

// layer is files as an OCI layer (gzip), in name order, dated epoch.
func layer(files []file) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: epoch, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// writeLayout writes images into a fresh OCI layout at dir, each named by its ref.
func writeLayout(dir string, images []built) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	for _, b := range images {
		if err := p.AppendImage(b.image, layout.WithAnnotations(map[string]string{refNameAnnotation: b.ref})); err != nil {
			return fmt.Errorf("OCI layout: %s: %w", b.ref, err)
		}
	}
	return nil
}

// writeTarball writes images into one docker-load tarball at path, tagged by their refs.
func writeTarball(path string, images []built) error {
	tags := map[name.Tag]v1.Image{}
	for _, b := range images {
		tag, err := name.NewTag(b.ref)
		if err != nil {
			return err
		}
		tags[tag] = b.image
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := tarball.MultiWriteToFile(path, tags); err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	return nil
}
