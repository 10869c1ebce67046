// Command catalogrender renders the catalog's committed opm basic template (schema olm.template.basic) the way
// `opm alpha render-template basic` does — the same operator-registry template, render action and migrations, at
// the pinned opm version — but resolves each bundle image offline instead of pulling it:
//
//   - the bundle being built (--bundle-image) is the image its Dockerfile describes: the Dockerfile's LABELs are
//     the image labels and its COPY lines the content, so opm reads it exactly as it would read the built image;
//   - a released bundle is the document `make release-freeze` rendered when it was cut (--frozen DIR/<version>.yaml),
//     since a released image never changes.
//
// Any other image in the template is an error, as are a frozen release the template no longer lists (a released
// version cannot leave the catalog) and a template that does not list the bundle being built.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/operator-framework/operator-registry/alpha/action"
	"github.com/operator-framework/operator-registry/alpha/action/migrations"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/template/basic"
	"github.com/operator-framework/operator-registry/pkg/image"
	"github.com/sirupsen/logrus"
)

func main() {
	var (
		templatePath = flag.String("template", "", "the basic template (olm.template.basic) to render")
		bundleImage  = flag.String("bundle-image", "", "the image reference of the bundle being built")
		dockerfile   = flag.String("bundle-dockerfile", "bundle.Dockerfile", "the Dockerfile of that bundle image; COPY sources are relative to --bundle-context")
		buildContext = flag.String("bundle-context", ".", "the build context of that bundle image")
		frozenDir    = flag.String("frozen", "", "the directory of frozen releases (<version>.yaml, one rendered olm.bundle each); may be absent")
		migrateLevel = flag.String("migrate-level", "", "the last opm migration to run, as opm's --migrate-level")
		bundleOnly   = flag.Bool("bundle-only", false, "render only the bundle being built (what make release-freeze keeps), not the template")
	)
	flag.Parse()
	if (*templatePath == "") != *bundleOnly || *bundleImage == "" {
		fail(errors.New("--bundle-image and either --template or --bundle-only are required"))
	}
	// opm's bundle loading logs on the happy path; the errors that matter are returned.
	logrus.SetOutput(io.Discard)
	current := dockerfileImage{ref: *bundleImage, dockerfile: *dockerfile, context: *buildContext}
	var cfg *declcfg.DeclarativeConfig
	var err error
	if *bundleOnly {
		cfg, err = renderBundle(context.Background(), current, *migrateLevel)
	} else {
		cfg, err = render(context.Background(), *templatePath, *migrateLevel, *frozenDir, current)
	}
	if err != nil {
		fail(err)
	}
	if err := declcfg.WriteYAML(*cfg, os.Stdout); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "catalogrender:", err)
	os.Exit(1)
}

// renderBundle renders the bundle being built exactly as opm's basic template renders a pulled bundle image, with a
// registry that reads it from its Dockerfile instead of pulling it.
func renderBundle(ctx context.Context, current dockerfileImage, migrateLevel string) (*declcfg.DeclarativeConfig, error) {
	var m *migrations.Migrations
	if migrateLevel != "" {
		var err error
		if m, err = migrations.NewMigrations(migrateLevel); err != nil {
			return nil, err
		}
	}
	reg := &dockerfileRegistry{image: current}
	return action.Render{Refs: []string{current.ref}, Registry: reg, AllowedRefMask: action.RefBundleImage, Migrations: m}.Run(ctx)
}

func render(ctx context.Context, templatePath, migrateLevel, frozenDir string, current dockerfileImage) (*declcfg.DeclarativeConfig, error) {
	frozen, err := loadFrozen(frozenDir)
	if err != nil {
		return nil, err
	}
	rendered := map[string]bool{}
	tmpl := basic.Template{RenderBundle: func(ctx context.Context, ref string) (*declcfg.DeclarativeConfig, error) {
		rendered[ref] = true
		if b, ok := frozen[ref]; ok {
			if ref == current.ref {
				return nil, fmt.Errorf("bundle image %s is being built but was already released (frozen in %s): bump VERSION", ref, frozenDir)
			}
			return &declcfg.DeclarativeConfig{Bundles: []declcfg.Bundle{b}}, nil
		}
		if ref != current.ref {
			return nil, fmt.Errorf("bundle image %s is neither the bundle being built (%s) nor a frozen release in %s", ref, current.ref, frozenDir)
		}
		return renderBundle(ctx, current, migrateLevel)
	}}
	f, err := os.Open(templatePath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := tmpl.Render(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", templatePath, err)
	}
	var missing []string
	for ref := range frozen {
		if !rendered[ref] {
			missing = append(missing, ref)
		}
	}
	if !rendered[current.ref] {
		missing = append(missing, current.ref+" (the bundle being built)")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%s lists no olm.bundle for %s", templatePath, strings.Join(missing, ", "))
	}
	return cfg, nil
}

// loadFrozen reads every frozen release: one olm.bundle per file, keyed by its image reference.
func loadFrozen(dir string) (map[string]declcfg.Bundle, error) {
	frozen := map[string]declcfg.Bundle{}
	if dir == "" {
		return frozen, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		cfg, err := declcfg.LoadReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(cfg.Bundles) != 1 || len(cfg.Packages)+len(cfg.Channels)+len(cfg.Others) != 0 {
			return nil, fmt.Errorf("%s: a frozen release holds exactly one olm.bundle and nothing else", file)
		}
		b := cfg.Bundles[0]
		if prev, dup := frozen[b.Image]; dup {
			return nil, fmt.Errorf("%s: image %s is frozen twice (also as %s)", file, b.Image, prev.Name)
		}
		frozen[b.Image] = b
	}
	return frozen, nil
}

// dockerfileImage is an image that is not built: its Dockerfile (FROM scratch, LABEL and COPY lines only) and build
// context say what it would hold.
type dockerfileImage struct {
	ref, dockerfile, context string
}

// instructions reads the Dockerfile's labels and copies, refusing any instruction that would make the built image
// differ from what they describe.
func (i dockerfileImage) instructions() (labels map[string]string, copies [][2]string, err error) {
	f, err := os.Open(i.dockerfile)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	labels = map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		args := strings.Fields(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			if len(args) != 1 || args[0] != "scratch" {
				return nil, nil, fmt.Errorf("%s:%d: only FROM scratch can be read without building", i.dockerfile, n)
			}
		case "LABEL":
			for _, kv := range args {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, nil, fmt.Errorf("%s:%d: LABEL %q is not key=value", i.dockerfile, n, kv)
				}
				if unq, err := strconv.Unquote(v); err == nil {
					v = unq
				}
				labels[k] = v
			}
		case "COPY":
			if len(args) != 2 || strings.HasPrefix(args[0], "--") {
				return nil, nil, fmt.Errorf("%s:%d: only COPY <source> <destination> is supported", i.dockerfile, n)
			}
			copies = append(copies, [2]string{args[0], args[1]})
		default:
			return nil, nil, fmt.Errorf("%s:%d: instruction %s is not supported", i.dockerfile, n, word)
		}
	}
	return labels, copies, sc.Err()
}

// dockerfileRegistry is an opm image registry holding one image, read from its Dockerfile.
type dockerfileRegistry struct{ image dockerfileImage }

var _ image.Registry = (*dockerfileRegistry)(nil)

func (r *dockerfileRegistry) check(ref image.Reference) error {
	if ref.String() != r.image.ref {
		return fmt.Errorf("image %s is not available offline (only %s is)", ref, r.image.ref)
	}
	return nil
}

func (r *dockerfileRegistry) Pull(_ context.Context, ref image.Reference) error { return r.check(ref) }

func (r *dockerfileRegistry) Labels(_ context.Context, ref image.Reference) (map[string]string, error) {
	if err := r.check(ref); err != nil {
		return nil, err
	}
	labels, _, err := r.image.instructions()
	return labels, err
}

// Unpack writes the image's filesystem: each COPY source (a directory's content, or a file) at its destination.
func (r *dockerfileRegistry) Unpack(_ context.Context, ref image.Reference, dir string) error {
	if err := r.check(ref); err != nil {
		return err
	}
	_, copies, err := r.image.instructions()
	if err != nil {
		return err
	}
	for _, c := range copies {
		if err := copyTree(filepath.Join(r.image.context, c[0]), filepath.Join(dir, c[1])); err != nil {
			return err
		}
	}
	return nil
}

func (r *dockerfileRegistry) Destroy() error { return nil }

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: only regular files can be copied", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
