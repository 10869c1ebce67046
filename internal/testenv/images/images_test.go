package images

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/gomega"
)

func repoFile(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", "..", ".."}, elem...)...)
}

// placeholderBinaries stands in for the built manager and katastroma: the checks here are about the image's shape,
// not the binaries (test/realnode runs the real ones).
func placeholderBinaries(t *testing.T) map[string]string {
	dir := t.TempDir()
	out := map[string]string{}
	for inImage := range OperatorImage.Binaries {
		p := filepath.Join(dir, path.Base(inImage))
		if err := os.WriteFile(p, []byte("binary "+inImage), 0o755); err != nil {
			t.Fatal(err)
		}
		out[inImage] = p
	}
	return out
}

// imageFiles lists the regular files of the image's layers with their modes.
func imageFiles(t *testing.T, img v1.Image) map[string]int64 {
	g := NewWithT(t)
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string]int64{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		g.Expect(err).NotTo(HaveOccurred())
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			if hdr.Typeflag == tar.TypeReg {
				files["/"+hdr.Name] = hdr.Mode
			}
		}
		g.Expect(rc.Close()).To(Succeed())
	}
	return files
}

func TestOfflineOperatorImageMatchesDockerfile(t *testing.T) {
	g := NewWithT(t)
	f, err := os.Open(repoFile("Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	stage, err := ParseFinalStage(f)
	g.Expect(err).NotTo(HaveOccurred())

	img, err := Build(OperatorSpec(OperatorRef, placeholderBinaries(t)))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(cfg.Config.User).To(Equal(stage.User), "USER")
	g.Expect(cfg.Config.Entrypoint).To(Equal(stage.Entrypoint), "ENTRYPOINT")
	g.Expect(cfg.Config.Labels).To(Equal(stage.Labels), "LABELs (an empty map when the Dockerfile sets none)")
	workdir := stage.WorkingDir
	if workdir == "" {
		workdir = "/"
	}
	g.Expect(cfg.Config.WorkingDir).To(Equal(workdir), "WORKDIR")

	// Every file the final stage copies from the builder is in the image, executable, at the same path, and the
	// offline image copies nothing else of the operator's.
	copied := map[string]bool{}
	files := imageFiles(t, img)
	for _, c := range stage.Copies {
		if c.From == "" {
			// From the build context: repository files (the licence), the same bytes at the same path.
			g.Expect(c.Sources).To(HaveLen(1), "%+v", c)
			g.Expect(OperatorImage.ContextFiles).To(HaveKeyWithValue(c.Dest, c.Sources[0]), "the offline image copies %s", c.Sources[0])
			g.Expect(files).To(HaveKey(c.Dest))
			continue
		}
		for _, src := range c.Sources {
			dest := c.Dest
			if dest == "." || strings.HasSuffix(dest, "/") {
				dest = path.Join(workdir, dest, path.Base(src))
			} else if !path.IsAbs(dest) {
				dest = path.Join(workdir, dest)
			}
			copied[dest] = true
		}
	}
	binaries := map[string]bool{}
	for p := range OperatorImage.Binaries {
		binaries[p] = true
	}
	g.Expect(binaries).To(Equal(copied), "the offline image's binaries are the paths the Dockerfile copies")
	for p := range copied {
		g.Expect(files).To(HaveKeyWithValue(p, int64(0o755)), "%s in the image, executable", p)
	}

	// The builder stage builds each binary from the package the offline build uses.
	raw, err := os.ReadFile(repoFile("Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	for p, pkg := range OperatorImage.Binaries {
		g.Expect(string(raw)).To(ContainSubstring("-o "+path.Base(p)+" "+pkg), "the Dockerfile builds %s from %s", p, pkg)
	}
}

func TestParseFinalStage(t *testing.T) {
	for _, tc := range []struct {
		name, dockerfile string
		want             Stage
		wantErr          string
	}{
		{
			name: "last stage wins, continuations, quoted labels",
			dockerfile: "FROM golang AS builder\nUSER 0\nCOPY a b\n\n# comment\nFROM base:nonroot\n" +
				"LABEL a=1 \"b\"=\"two words\" \\\n  c=3\nWORKDIR /\nCOPY --from=builder --chown=1:1 /w/x /w/y ./\n" +
				"USER 65532:65532\nENTRYPOINT [\"/x\", \"--flag\"]\n",
			want: Stage{
				From: "base:nonroot", User: "65532:65532", Entrypoint: []string{"/x", "--flag"}, WorkingDir: "/",
				Labels: map[string]string{"a": "1", "b": "two words", "c": "3"}, Args: map[string]string{},
				Copies: []Copy{{From: "builder", Sources: []string{"/w/x", "/w/y"}, Dest: "./"}},
			},
		},
		{
			name:       "labels expanded with the stage's ARG defaults",
			dockerfile: "FROM x\nARG VERSION=1.2.3\nARG RELEASE\nLABEL version=\"${VERSION}\" release=$RELEASE-r\n",
			want: Stage{From: "x", Labels: map[string]string{"version": "1.2.3", "release": "-r"},
				Args: map[string]string{"VERSION": "1.2.3", "RELEASE": ""}},
		},
		{name: "shell-form entrypoint", dockerfile: "FROM x\nENTRYPOINT /manager --a\n", wantErr: "exec (JSON) form"},
		{name: "label without value", dockerfile: "FROM x\nLABEL lonely\n", wantErr: "not key=value"},
		{name: "copy without destination", dockerfile: "FROM x\nCOPY --from=b /only\n", wantErr: "needs a source and a destination"},
		{name: "no FROM", dockerfile: "USER 1\n", wantErr: "no FROM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseFinalStage(strings.NewReader(tc.dockerfile))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestBuildIsReproducibleAndRoundTripsThroughAnArchive(t *testing.T) {
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "agent")
	g.Expect(os.WriteFile(bin, []byte("static binary"), 0o755)).To(Succeed())
	spec := StaticBinarySpec("example.test/agent:v1", bin, "--listen=:8080")
	first, err := Build(spec)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := Build(spec)
	g.Expect(err).NotTo(HaveOccurred())
	d1, err := first.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	d2, err := second.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d1).To(Equal(d2), "the same inputs give the same digest")

	archive := filepath.Join(t.TempDir(), "images.tar")
	g.Expect(WriteArchive(archive, map[string]v1.Image{spec.Ref: first})).To(Succeed())
	tag, err := name.NewTag(spec.Ref)
	g.Expect(err).NotTo(HaveOccurred())
	loaded, err := tarball.ImageFromPath(archive, &tag)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := loaded.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Config.User).To(Equal(NonRootUser))
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/agent"}))
	g.Expect(cfg.Config.Cmd).To(Equal([]string{"--listen=:8080"}))
	g.Expect(imageFiles(t, loaded)).To(HaveKeyWithValue("/agent", int64(0o755)))
}

func TestBuildRejectsBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    Spec
		wantErr string
	}{
		{"no reference", Spec{Entrypoint: []string{"/x"}}, "Spec.Ref is empty"},
		{"bad reference", Spec{Ref: "UPPER:case:x", Entrypoint: []string{"/x"}}, "Spec.Ref"},
		{"nothing to run", Spec{Ref: "example.test/x:1"}, "neither Entrypoint nor Cmd"},
		{"relative file", Spec{Ref: "example.test/x:1", Entrypoint: []string{"/x"}, Files: []File{{Path: "x"}}}, "clean absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.spec)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
