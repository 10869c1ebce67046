package source

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Subtree is what the source handler ships to the renderer for a source target.
type Subtree struct {
	// Tar holds the files under Root, with paths relative to Root.
	Tar []byte
	// Root is the directory shipped ("" is the repository root): the target path, or the directory enclosing it
	// and everything its kustomizations reach (pipeline.EnclosingRoot).
	Root string
	// Target is the target path relative to Root ("" when Root is the target path); sent as MDTargetPath.
	Target string
	// Inputs are the directories and files outside the target path its kustomizations reach (bases,
	// components, …): a push changing one of them concerns the target (Target.Matches).
	Inputs []string
	Files  int
	Bytes  int64
}

// gitTree reads a commit's tree for pipeline.EnclosingRoot.
type gitTree struct{ t *object.Tree }

// ReadFile returns the regular file at p; ok is false when p is missing, a directory or a link.
func (g gitTree) ReadFile(p string) ([]byte, bool, error) {
	f, err := g.t.File(p)
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !f.Mode.IsFile() {
		return nil, false, nil
	}
	s, err := f.Contents()
	return []byte(s), err == nil, err
}

// IsDir reports whether p is a directory of the tree.
func (g gitTree) IsDir(p string) bool {
	if p == "" || p == "." {
		return true
	}
	_, err := g.t.Tree(p)
	return err == nil
}

// ShipSubtree tars what the renderer needs for the source target name (namespace/name) at dir of a commit: the
// enclosing subtree of dir and the directories its kustomizations reach, bounded by lim. A missing dir, a
// kustomization reaching outside the repository and a subtree over the limits are errors.
func ShipSubtree(c *object.Commit, name, dir string, lim pipeline.Limits) (*Subtree, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	dir = CleanPath(dir)
	if dir != "" {
		if _, err := tree.Tree(dir); err != nil {
			return nil, fmt.Errorf("path %q at %s: %w", dir, c.Hash, err)
		}
	}
	root, inputs, err := pipeline.RenderInputs(gitTree{tree}, dir)
	if err != nil {
		return nil, fmt.Errorf("source target %s at %s: %w", name, c.Hash, err)
	}
	sub := tree
	if root != "" {
		if sub, err = tree.Tree(root); err != nil {
			return nil, fmt.Errorf("path %q at %s: %w", root, c.Hash, err)
		}
	}
	st := &Subtree{Root: root, Target: pipeline.RelPath(root, dir), Inputs: inputs}
	files := map[string][]byte{}
	err = sub.Files().ForEach(func(f *object.File) error {
		if !f.Mode.IsFile() {
			return nil // symlinks and submodules are not rendered
		}
		// Counted before reading, so a huge subtree fails before it is held in memory.
		st.Files++
		st.Bytes += f.Size
		if err := lim.Check(name, root, st.Files, st.Bytes); err != nil {
			return err
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer func() { _ = r.Close() }()
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(f.Name, "/")] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.Tar, err = pipeline.TarFiles(files)
	return st, err
}
