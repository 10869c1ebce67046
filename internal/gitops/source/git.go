package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Credential Secret types (data key "type").
const (
	CredGitHubToken = "github-token"
	CredBasicAuth   = "basic-auth"
	CredSSHKey      = "ssh-key"
)

// AuthFromSecret builds git credentials from a credential Secret: github-token (token), basic-auth (username,
// password) or ssh-key (private-key, and known-hosts to verify the server). GitHub App types are not supported yet.
func AuthFromSecret(s *corev1.Secret) (transport.AuthMethod, error) {
	d := s.Data
	switch t := string(d["type"]); t {
	case CredGitHubToken:
		if len(d["token"]) == 0 {
			return nil, fmt.Errorf("secret %s: type github-token needs data.token", s.Name)
		}
		return &githttp.BasicAuth{Username: "x-access-token", Password: string(d["token"])}, nil
	case CredBasicAuth:
		if len(d["username"]) == 0 || len(d["password"]) == 0 {
			return nil, fmt.Errorf("secret %s: type basic-auth needs data.username and data.password", s.Name)
		}
		return &githttp.BasicAuth{Username: string(d["username"]), Password: string(d["password"])}, nil
	case CredSSHKey:
		if len(d["private-key"]) == 0 {
			return nil, fmt.Errorf("secret %s: type ssh-key needs data.private-key", s.Name)
		}
		if len(d["known-hosts"]) == 0 {
			return nil, fmt.Errorf("secret %s: type ssh-key needs data.known-hosts to verify the server", s.Name)
		}
		keys, err := gitssh.NewPublicKeys("git", d["private-key"], string(d["passphrase"]))
		if err != nil {
			return nil, fmt.Errorf("secret %s: private-key: %w", s.Name, err)
		}
		f, err := os.CreateTemp("", "katastroma-known-hosts-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.Remove(f.Name()) }()
		if _, err := f.Write(d["known-hosts"]); err != nil {
			_ = f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		if keys.HostKeyCallback, err = gitssh.NewKnownHostsCallback(f.Name()); err != nil {
			return nil, fmt.Errorf("secret %s: known-hosts: %w", s.Name, err)
		}
		return keys, nil
	case "github-app-tenant", "github-app-platform":
		return nil, fmt.Errorf("secret %s: credential type %s is not supported yet", s.Name, t)
	default:
		return nil, fmt.Errorf("secret %s: unknown credential type %q (want github-token, basic-auth or ssh-key)", s.Name, t)
	}
}

// DefaultGitTimeout bounds one git fetch or ref listing when the handler sets none (--git-timeout).
const DefaultGitTimeout = 2 * time.Minute

// gitDeadline runs one git operation under a deadline of d (DefaultGitTimeout when 0) and says so when the
// deadline ended it: a git server that accepts and never answers must fail the event, not stall it.
func gitDeadline(ctx context.Context, d time.Duration, what string, f func(context.Context) error) error {
	if d <= 0 {
		d = DefaultGitTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := f(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within the git timeout of %s (--git-timeout): %w", what, d, err)
	}
	return err
}

// authMethod is a git credential.
type authMethod = transport.AuthMethod

// ResolveRef returns the commit SHA a ref points to on the remote.
func ResolveRef(ctx context.Context, url, ref string, auth transport.AuthMethod) (string, error) {
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", url, err)
	}
	want := NormalizeRef(ref)
	for _, r := range refs {
		if r.Name().String() == want {
			return r.Hash().String(), nil
		}
	}
	return "", fmt.Errorf("%s has no ref %s", url, want)
}

// DefaultMaxFetchBytes bounds the objects one fetch may store (--max-fetch-bytes): a repository, or a history,
// too large to hold in memory fails its own event, not the source handler.
const DefaultMaxFetchBytes = 256 << 20

// fallbackDepth bounds the by-ref fetch of servers that refuse a bare SHA: deep enough for a commit a few pushes
// behind the head (only heads are deployed; replays go back a little), never the whole history.
const fallbackDepth = 64

// ErrFetchTooLarge means a fetch stored more than its size limit.
var ErrFetchTooLarge = errors.New("fetch over the size limit")

// boundedStorage is an in-memory object store that refuses objects beyond max bytes in total.
type boundedStorage struct {
	*memory.Storage
	max, used int64
}

func (s *boundedStorage) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if s.used += o.Size(); s.used > s.max {
		return plumbing.ZeroHash, fmt.Errorf("%w: over the fetch size limit of %d bytes (--max-fetch-bytes)", ErrFetchTooLarge, s.max)
	}
	return s.Storage.SetEncodedObject(o)
}

// FetchCommit fetches exactly one commit (depth 1) into memory, within DefaultMaxFetchBytes.
func FetchCommit(ctx context.Context, url, ref, sha string, auth transport.AuthMethod) (*object.Commit, error) {
	return FetchCommitBounded(ctx, url, ref, sha, auth, DefaultMaxFetchBytes)
}

// FetchCommitBounded fetches exactly one commit (depth 1) into memory, storing at most maxBytes of objects.
// Servers that refuse a want for a bare SHA (uploadpack.allowReachableSHA1InWant off) are asked for the ref
// instead, at most fallbackDepth commits deep.
func FetchCommitBounded(ctx context.Context, url, ref, sha string, auth transport.AuthMethod, maxBytes int64) (*object.Commit, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFetchBytes
	}
	st := &boundedStorage{Storage: memory.NewStorage(), max: maxBytes}
	repo, err := git.InitWithOptions(st, nil, git.InitOptions{})
	if err != nil {
		return nil, err
	}
	rem, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}})
	if err != nil {
		return nil, err
	}
	err = rem.FetchContext(ctx, &git.FetchOptions{Auth: auth, Depth: 1, Tags: git.NoTags,
		RefSpecs: []config.RefSpec{config.RefSpec(sha + ":refs/katastroma/commit")}})
	if errors.Is(err, ErrFetchTooLarge) {
		return nil, fmt.Errorf("fetching %s at %s: %w", url, sha, err)
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		full := NormalizeRef(ref)
		ferr := rem.FetchContext(ctx, &git.FetchOptions{Auth: auth, Tags: git.NoTags, Depth: fallbackDepth,
			RefSpecs: []config.RefSpec{config.RefSpec("+" + full + ":refs/katastroma/ref")}})
		if ferr != nil && !errors.Is(ferr, git.NoErrAlreadyUpToDate) {
			return nil, fmt.Errorf("fetching %s at %s: %w (by ref: %w)", url, sha, err, ferr)
		}
	}
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, fmt.Errorf("commit %s is not on %s %s: %w", sha, url, ref, err)
	}
	return c, nil
}

// TarPath builds a tar of the subtree at dir of a commit, with paths relative to dir. A missing dir is an error.
func TarPath(c *object.Commit, dir string) ([]byte, int, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, 0, err
	}
	if dir = CleanPath(dir); dir != "" {
		if tree, err = tree.Tree(dir); err != nil {
			return nil, 0, fmt.Errorf("path %q at %s: %w", dir, c.Hash, err)
		}
	}
	files := map[string][]byte{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !f.Mode.IsFile() {
			return nil // symlinks and submodules are not rendered
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
		return nil, 0, err
	}
	b, err := pipeline.TarFiles(files)
	return b, len(files), err
}
