// Package images builds container images offline, without a Docker daemon or a registry: each image is one layer
// holding static Go binaries (and the few files a distroless base would bring), with the entrypoint, user and labels
// of its recipe, written as a docker-archive tarball that `ctr images import` loads into containerd.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRootUser is distroless' "nonroot" user and group, numeric so the kubelet can check runAsNonRoot.
const NonRootUser = "65532:65532"

// File is one file of an image's layer: its content comes from Source (a path on this machine) or Data.
type File struct {
	// Path is the absolute path inside the image.
	Path string
	// Source is a file on this machine to copy; Data is used when Source is empty.
	Source string
	Data   []byte
	// Mode is the permission bits (0o755 for binaries, 0o644 for data when zero).
	Mode os.FileMode
}

// Spec describes one image.
type Spec struct {
	// Ref is the image reference the tarball tags it with (e.g. registry.k8s.io/pause:3.10.1).
	Ref        string
	Files      []File
	Entrypoint []string
	Cmd        []string
	User       string
	WorkingDir string
	Labels     map[string]string
	Env        []string
	// Dirs are empty directories to create, with mode 0o755 (e.g. a mount point); /tmp is always made (1777).
	Dirs []string
}

// created is the fixed creation time of every image, so the same binaries give the same digest.
var created = time.Unix(0, 0).UTC()

// Build assembles the image a Spec describes.
func Build(spec Spec) (v1.Image, error) {
	if spec.Ref == "" {
		return nil, errors.New("images: Spec.Ref is empty")
	}
	if _, err := name.ParseReference(spec.Ref); err != nil {
		return nil, fmt.Errorf("images: Spec.Ref %q: %w", spec.Ref, err)
	}
	if len(spec.Entrypoint) == 0 && len(spec.Cmd) == 0 {
		return nil, fmt.Errorf("images: %s has neither Entrypoint nor Cmd", spec.Ref)
	}
	layerTar, err := layerTarball(spec)
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", spec.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	env := spec.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	workdir := spec.WorkingDir
	if workdir == "" {
		workdir = "/"
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, User: spec.User, WorkingDir: workdir,
			Labels: spec.Labels, Env: env,
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "quartet-operator internal/testenv/images", Comment: spec.Ref,
	}})
}

// layerTarball writes the spec's files, their parent directories, /tmp and Dirs as one uncompressed tar owned by
// root, sorted so the same inputs give the same bytes.
func layerTarball(spec Spec) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	entries := map[string]entry{}
	addDir := func(dir string, mode int64) {
		for d := dir; d != "/" && d != "."; d = path.Dir(d) {
			key := strings.TrimPrefix(d, "/") + "/"
			if _, ok := entries[key]; !ok || d == dir {
				entries[key] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: key, Mode: mode, ModTime: created}}
			}
			mode = 0o755
		}
	}
	for _, f := range spec.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("file path %q is not a clean absolute path", f.Path)
		}
		data := f.Data
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, err
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		addDir(path.Dir(f.Path), 0o755)
		key := strings.TrimPrefix(f.Path, "/")
		entries[key] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: key, Mode: int64(mode.Perm()), Size: int64(len(data)), ModTime: created}, data: data}
	}
	addDir("/tmp", 0o1777)
	for _, d := range spec.Dirs {
		addDir(path.Clean(d), 0o755)
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, k := range keys {
		e := entries[k]
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes images (by their references) into one docker-archive tarball at file.
func WriteArchive(file string, imgs map[string]v1.Image) error {
	refs := map[name.Reference]v1.Image{}
	for ref, img := range imgs {
		r, err := name.ParseReference(ref)
		if err != nil {
			return fmt.Errorf("images: reference %q: %w", ref, err)
		}
		refs[r] = img
	}
	return tarball.MultiRefWriteToFile(file, refs)
}

// GoBuild builds the main package pkg (a path relative to the module at moduleDir, e.g. ./cmd) as a static
// linux binary at out: CGO off and -trimpath, as the Dockerfile's builder stage does.
func GoBuild(ctx context.Context, moduleDir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
	}
	return nil
}
