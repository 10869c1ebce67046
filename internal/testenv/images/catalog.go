package images

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// repoRoot is the repository this file is in (the images are built from its checkout).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// PauseRef is the sandbox image the real node's containerd is pinned to; the offline build of pause/ is tagged
// with it, so nothing is ever pulled.
const PauseRef = "registry.k8s.io/pause:3.10.1"

// OperatorRef tags the offline operator image (the Makefile's IMG for this VERSION is the release name; tests use
// this local one with imagePullPolicy Never).
const OperatorRef = "ghcr.io/quartet-dev/quartet-operator:offline"

// distrolessFiles are what the Dockerfile's base image (distroless/static:nonroot) brings that the operator's
// binaries use: the user database naming root and nonroot, and CA certificates when this machine has them.
func distrolessFiles() []File {
	files := []File{
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
	}
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(bundle); err == nil {
		files = append(files, File{Path: bundle, Source: bundle})
	}
	return files
}

// PauseSpec is the sandbox image from the pause binary (built from ./internal/testenv/images/pause).
func PauseSpec(binary string) Spec {
	return Spec{
		Ref:        PauseRef,
		Files:      []File{{Path: "/pause", Source: binary, Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       NonRootUser,
	}
}

// StaticBinarySpec is an image holding one static binary at /<base name>, run as the non-root user with args: the
// shape of the test agents, the collector stand-in and other peers that run as pods.
func StaticBinarySpec(ref, binary string, args ...string) Spec {
	inImage := "/" + path.Base(binary)
	return Spec{
		Ref:        ref,
		Files:      append(distrolessFiles(), File{Path: inImage, Source: binary, Mode: 0o755}),
		Entrypoint: []string{inImage},
		Cmd:        args,
		User:       NonRootUser,
	}
}

// OperatorImage is what the Dockerfile's final stage declares; the test in this package parses the Dockerfile and
// fails when the two differ, so the release recipe and the offline image cannot drift apart.
var OperatorImage = struct {
	User       string
	Entrypoint []string
	WorkingDir string
	Labels     map[string]string
	// Binaries maps each copied path in the image to the main package the builder stage builds it from.
	Binaries map[string]string
	// ContextFiles maps each path in the image the Dockerfile copies from the build context to its file in the
	// repository.
	ContextFiles map[string]string
}{
	User:       NonRootUser,
	Entrypoint: []string{"/manager"},
	WorkingDir: "/",
	Labels: map[string]string{
		"name":                              "quartet-operator",
		"vendor":                            "Quartet",
		"maintainer":                        "Quartet maintainers <maintainers@quartet.dev>",
		"version":                           "0.1.0",
		"release":                           "1",
		"summary":                           "Kubernetes operator for Fleet Management, gNMIc telemetry, AI agents and event-driven GitOps",
		"description":                       "quartet-operator runs four systems side by side: Grafana Fleet Management sync, gNMIc network telemetry collectors, AI agent workloads with canaries and an MCP registry, and the katastroma GitOps pipeline stages.",
		"io.k8s.display-name":               "quartet-operator",
		"org.opencontainers.image.title":    "quartet-operator",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.version":  "0.1.0",
		"org.opencontainers.image.source":   "https://github.com/quartet-dev/quartet-operator",
	},
	Binaries:     map[string]string{"/manager": "./cmd", "/katastroma": "./cmd/katastroma"},
	ContextFiles: map[string]string{"/licenses/LICENSE": "LICENSE"},
}

// OperatorSpec is the operator image from built binaries: binaries maps each path of OperatorImage.Binaries to the
// file built from its package.
func OperatorSpec(ref string, binaries map[string]string) Spec {
	files := distrolessFiles()
	for inImage := range OperatorImage.Binaries {
		files = append(files, File{Path: inImage, Source: binaries[inImage], Mode: 0o755})
	}
	for inImage, inRepo := range OperatorImage.ContextFiles {
		files = append(files, File{Path: inImage, Source: filepath.Join(repoRoot(), inRepo), Mode: 0o644})
	}
	return Spec{
		Ref:        ref,
		Files:      files,
		Entrypoint: OperatorImage.Entrypoint,
		User:       OperatorImage.User,
		WorkingDir: OperatorImage.WorkingDir,
		Labels:     OperatorImage.Labels,
	}
}

// GNMIcStandinRef tags the offline image of the gNMIc collector stand-in (./test/gnmicserver/cmd/gnmic-standin).
// The tag is the gNMIc version the stand-in decodes as (gnmicserver.DefaultVersion): the operator reads a Cluster's
// collector version from its image tag and plans for it.
const GNMIcStandinRef = "quartet.test/gnmic-standin:0.47.0"

// GNMIcStandinSpec is the collector stand-in's image, shaped like gNMIc's release image where the operator's pod
// template relies on it: the binary at /app/gnmic as the entrypoint (the template sets only Args, `--config
// /etc/gnmic/config.yaml collector`), the config and data directories (plan.OutputDataDir) as mount points. It runs
// as the non-root user, which the template asks for anyway (runAsNonRoot, UID 65532).
func GNMIcStandinSpec(ref, binary string) Spec {
	return Spec{
		Ref:        ref,
		Files:      append(distrolessFiles(), File{Path: "/app/gnmic", Source: binary, Mode: 0o755}),
		Entrypoint: []string{"/app/gnmic"},
		Cmd:        []string{"help"},
		User:       NonRootUser,
		Dirs:       []string{"/etc/gnmic", "/var/lib/gnmic"},
	}
}

// WriteOperatorArchive builds the operator's binaries (OperatorImage.Binaries) from the repository into dir, assembles
// the operator image from them and writes it into one archive in dir, tagged with every reference of refs (an
// install's manager image and its related images that name the same image); it returns the archive's path.
func WriteOperatorArchive(ctx context.Context, dir string, refs ...string) (string, error) {
	if len(refs) == 0 {
		return "", errors.New("images: the operator image needs at least one reference")
	}
	binaries := map[string]string{}
	for inImage, pkg := range OperatorImage.Binaries {
		out := filepath.Join(dir, path.Base(inImage))
		if err := GoBuild(ctx, repoRoot(), pkg, out); err != nil {
			return "", err
		}
		binaries[inImage] = out
	}
	imgs := map[string]v1.Image{}
	for _, ref := range refs {
		img, err := Build(OperatorSpec(ref, binaries))
		if err != nil {
			return "", err
		}
		imgs[ref] = img
	}
	archive := filepath.Join(dir, "operator-images.tar")
	return archive, WriteArchive(archive, imgs)
}
