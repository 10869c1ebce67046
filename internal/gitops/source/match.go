// Package source is the GitHub source handler: the push webhook, source-target matching, leases, shallow clones
// at the pushed commit and the tar stream to the renderer, plus the Retrieve and Replay RPCs.
package source

import (
	"encoding/json"
	"net/url"
	"path"
	"strings"
)

// NormalizeRepoURL reduces the https, ssh (scp-like or ssh://) and git forms of a clone URL to host/owner/repo in
// lower case, without credentials, port, ".git" or trailing slash, so one repository matches however it is written.
func NormalizeRepoURL(raw string) string {
	s := strings.TrimSpace(raw)
	var host, p string
	switch {
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return strings.ToLower(s)
		}
		host, p = u.Hostname(), u.Path
	case strings.Contains(s, ":") && !strings.Contains(strings.SplitN(s, ":", 2)[0], "/"):
		// scp-like: [user@]host:owner/repo.git
		parts := strings.SplitN(s, ":", 2)
		host, p = parts[0], parts[1]
		if i := strings.LastIndex(host, "@"); i >= 0 {
			host = host[i+1:]
		}
	default:
		i := strings.Index(s, "/")
		if i < 0 {
			return strings.ToLower(s)
		}
		host, p = s[:i], s[i:]
	}
	p = strings.Trim(p, "/")
	p = strings.TrimSuffix(p, ".git")
	p = strings.TrimSuffix(p, "/")
	return strings.ToLower(host) + "/" + strings.ToLower(p)
}

// NormalizeRef turns a short branch name into its full ref (main → refs/heads/main).
func NormalizeRef(ref string) string {
	ref = strings.TrimSpace(ref)
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/heads/" + ref
}

// CleanPath returns a target path as a clean slash path without leading or trailing slashes; "" is the root.
func CleanPath(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	return strings.TrimPrefix(p, "/")
}

// UnderPath reports whether file lies under dir on a directory boundary: deploy holds deploy/a.yaml and
// deploy/x/b.yaml, but not deploy2/a.yaml. The root ("") holds everything.
func UnderPath(dir, file string) bool {
	dir, file = CleanPath(dir), CleanPath(file)
	if dir == "" {
		return true
	}
	return file == dir || strings.HasPrefix(file, dir+"/")
}

// Target is a source target as registered in its ConfigMap.
type Target struct {
	Namespace, Name    string
	RepoURL, Ref, Path string
	// Overrides are the Helm values: read from OverridesSecret when the event runs (overrides.go); set from the
	// ConfigMap only while an earlier version's data.overrides awaits its move into a Secret.
	Overrides string
	// OverridesSecret names the Secret holding the Helm values (AnnotationOverridesSecret).
	OverridesSecret string
	// HelmHooks is data.helm-hooks, the renderer's hook policy (renderer.DataHelmHooks).
	HelmHooks string
	// VerifyTimeout is data.verify-timeout, the provisioner's health verify timeout for this target.
	VerifyTimeout    string
	CredentialSecret string
	Offboard         bool
	// LeaseRef is the reference of the lease held on the target (its lease annotation), not a lease ID.
	LeaseRef string
	// Inputs are the paths outside Path the target's last render read (AnnotationRenderInputs): an overlay's
	// bases and components.
	Inputs []string
}

// AnnotationRenderInputs lists (JSON), on a source target, the directories and files outside its path that its
// last render read, written by the source handler with each event's result; a push changing one of them matches
// the target. Absent when the render reads only the target's path.
const AnnotationRenderInputs = "katastroma.org/render-inputs"

func encodeInputs(inputs []string) string {
	if len(inputs) == 0 {
		return ""
	}
	b, _ := json.Marshal(inputs)
	return string(b)
}

// decodeInputs reads AnnotationRenderInputs; a value that is not a JSON list of strings counts as none (the target
// then matches by its path alone until its next event rewrites it).
func decodeInputs(v string) []string {
	var out []string
	if v == "" || json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}

// Push is the part of a GitHub push event the handler uses.
type Push struct {
	Ref     string
	After   string
	Deleted bool
	// Forced is a force-push: its file lists describe a rewritten history, not what changed for the target.
	Forced   bool
	RepoURLs []string
	Files    []string
}

// Matches reports whether a push concerns a target: same repository (any URL form), same ref, and a changed file
// under the target path or under a path its last render read outside it (Inputs: a kustomize base, a component). A force-push or a push without file lists (a new branch, a rollback) is matched by
// repository and ref alone: the target is re-evaluated against the new head, and an unchanged render writes
// nothing.
func (t Target) Matches(p Push) bool {
	if NormalizeRef(t.Ref) != p.Ref {
		return false
	}
	want := NormalizeRepoURL(t.RepoURL)
	repo := false
	for _, u := range p.RepoURLs {
		if u != "" && NormalizeRepoURL(u) == want {
			repo = true
			break
		}
	}
	if !repo {
		return false
	}
	if p.Forced || len(p.Files) == 0 {
		return true
	}
	for _, f := range p.Files {
		if UnderPath(t.Path, f) {
			return true
		}
		for _, in := range t.Inputs {
			if UnderPath(in, f) {
				return true
			}
		}
	}
	return false
}
