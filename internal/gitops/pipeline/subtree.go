package pipeline

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// MDTargetPath carries, from the source handler to the renderer, the source target's path relative to the root of
// the files shipped (the enclosing subtree, see EnclosingRoot). Absent means the shipped root is the target path.
const MDTargetPath = "target-path"

// Limits bound the files shipped to the renderer: the source handler refuses to ship more, the renderer to accept
// more.
type Limits struct {
	// MaxBytes is the largest total size of the regular files.
	MaxBytes int64
	// MaxFiles is the largest number of regular files.
	MaxFiles int
}

// DefaultLimits are 64 MiB and 10,000 files.
var DefaultLimits = Limits{MaxBytes: 64 << 20, MaxFiles: 10000}

// String names the limits in errors.
func (l Limits) String() string {
	return fmt.Sprintf("%d bytes, %d files", l.MaxBytes, l.MaxFiles)
}

// Check reports files or bytes over the limits, naming the limit, the source target (namespace/name) and the
// subtree shipped for it.
func (l Limits) Check(target, subtree string, files int, bytes int64) error {
	if subtree == "" {
		subtree = "/"
	}
	switch {
	case files > l.MaxFiles:
		return fmt.Errorf("source target %s: the subtree %q shipped to the renderer has more than %d files "+
			"(the render limit is %s)", target, subtree, l.MaxFiles, l)
	case bytes > l.MaxBytes:
		return fmt.Errorf("source target %s: the subtree %q shipped to the renderer is larger than %d bytes "+
			"(the render limit is %s)", target, subtree, l.MaxBytes, l)
	}
	return nil
}

// Tree reads a repository tree by slash paths relative to its root ("" is the root).
type Tree interface {
	// ReadFile returns a regular file's content; ok is false when there is none at p.
	ReadFile(p string) (b []byte, ok bool, err error)
	// IsDir reports whether p is a directory.
	IsDir(p string) bool
}

// KustomizationNames are the file names kustomize reads in a directory, in its order of preference.
var KustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Kustomization is the part of a kustomization file that names other files or programs.
type Kustomization struct {
	Resources  []string `json:"resources"`
	Bases      []string `json:"bases"`
	Components []string `json:"components"`
	// Generators, transformers and validators are built like resources (files, directories or remote URLs) or
	// are inline configuration.
	Generators   []string `json:"generators"`
	Transformers []string `json:"transformers"`
	Validators   []string `json:"validators"`
	HelmCharts   []any    `json:"helmCharts"`
}

// References lists the resources, bases, components, generators, transformers and validators: every entry
// kustomize builds from a path or URL. An inline configuration (a multi-line YAML string among generators,
// transformers or validators) names nothing and is left out.
func (k Kustomization) References() []string {
	var out []string
	for _, l := range [][]string{k.Resources, k.Bases, k.Components, k.Generators, k.Transformers, k.Validators} {
		for _, r := range l {
			if !strings.Contains(r, "\n") {
				out = append(out, r)
			}
		}
	}
	return out
}

// Remote reports a kustomization entry that would make kustomize fetch (and run git) at render time.
func Remote(s string) bool {
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@") || strings.HasPrefix(s, "github.com/") ||
		strings.Contains(s, "?ref=")
}

// WalkKustomizations visits the kustomization file of dir and, transitively, of every local directory its
// resources, bases and components name, each once. It returns the directories visited (dir first) and the local
// paths referenced that are not directories. A reference that leaves the tree is an error; remote entries are
// not followed (visit sees them).
func WalkKustomizations(t Tree, dir string, visit func(file string, k Kustomization) error) (dirs, files []string, err error) {
	seen := map[string]bool{}
	queue := []string{cleanDir(dir)}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[d] {
			continue
		}
		seen[d] = true
		dirs = append(dirs, d)
		file, b, err := readKustomization(t, d)
		if err != nil || file == "" {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		var k Kustomization
		if err := yaml.Unmarshal(b, &k); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		if visit != nil {
			if err := visit(file, k); err != nil {
				return nil, nil, err
			}
		}
		for _, r := range k.References() {
			if Remote(r) {
				continue
			}
			p := cleanDir(path.Join(d, r))
			if path.IsAbs(r) || p == ".." || strings.HasPrefix(p, "../") {
				return nil, nil, fmt.Errorf("%s: %q lies outside the repository", file, r)
			}
			if t.IsDir(p) {
				queue = append(queue, p)
			} else {
				files = append(files, p)
			}
		}
	}
	return dirs, files, nil
}

func readKustomization(t Tree, dir string) (string, []byte, error) {
	for _, n := range KustomizationNames {
		p := path.Join(dir, n)
		b, ok, err := t.ReadFile(p)
		if err != nil {
			return "", nil, fmt.Errorf("reading %s: %w", p, err)
		}
		if ok {
			return p, b, nil
		}
	}
	return "", nil, nil
}

// EnclosingRoot is the deepest directory that holds target and everything its kustomizations reach (kustomize
// overlays name their bases as ../base): the subtree the renderer needs. It is target itself when nothing outside
// is referenced, and "" for the repository root.
func EnclosingRoot(t Tree, target string) (string, error) {
	root, _, err := RenderInputs(t, target)
	return root, err
}

// RenderInputs returns the enclosing root of target (EnclosingRoot) and the directories and files outside target
// that its kustomizations reach (bases, components, … and, transitively, theirs): with target itself, every path
// a render of target reads, so a change to any of them concerns it. Inputs are sorted; "" is the repository root.
func RenderInputs(t Tree, target string) (root string, inputs []string, err error) {
	dirs, files, err := WalkKustomizations(t, target, nil)
	if err != nil {
		return "", nil, err
	}
	root = cleanDir(target)
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] && !under(cleanDir(target), p) {
			seen[p] = true
			if p == "." {
				p = ""
			}
			inputs = append(inputs, p)
		}
	}
	for _, d := range dirs {
		root = commonDir(root, d)
		add(d)
	}
	for _, f := range files {
		root = commonDir(root, path.Dir(f))
		add(f)
	}
	if root == "." {
		root = ""
	}
	// A path inside another input adds nothing.
	var out []string
	for _, p := range inputs {
		inside := false
		for _, q := range inputs {
			inside = inside || (q != p && under(cleanDir(q), cleanDir(p)))
		}
		if !inside {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return root, out, nil
}

// under reports whether p lies in dir (both cleaned by cleanDir) on a directory boundary.
func under(dir, p string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// cleanDir cleans a slash path; the root is ".".
func cleanDir(p string) string {
	p = path.Clean(strings.Trim(p, "/"))
	if p == "" {
		return "."
	}
	return p
}

// commonDir is the deepest directory holding both a and b.
func commonDir(a, b string) string {
	if a == "." || b == "." {
		return "."
	}
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	if n == 0 {
		return "."
	}
	return strings.Join(as[:n], "/")
}

// RelPath is target relative to root (both as EnclosingRoot returns them); "" when they are the same.
func RelPath(root, target string) string {
	root, target = cleanDir(root), cleanDir(target)
	switch root {
	case target:
		return ""
	case ".":
		return target
	}
	return strings.TrimPrefix(target, root+"/")
}

// MapTree is a Tree over files keyed by slash paths.
type MapTree map[string][]byte

// ReadFile returns the file at p.
func (m MapTree) ReadFile(p string) ([]byte, bool, error) {
	b, ok := m[cleanDir(p)]
	return b, ok, nil
}

// IsDir reports whether any file lies under p.
func (m MapTree) IsDir(p string) bool {
	p = cleanDir(p)
	if p == "." {
		return true
	}
	for n := range m {
		if strings.HasPrefix(n, p+"/") {
			return true
		}
	}
	return false
}
