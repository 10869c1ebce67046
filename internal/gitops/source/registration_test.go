package source

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestValidateRegistration(t *testing.T) {
	ok := func() *Registration {
		return &Registration{RepoURL: "https://github.com/org/repo.git", Ref: "main", Path: "deploy"}
	}
	for name, tc := range map[string]struct {
		name   string
		modify func(*Registration)
		want   []string
	}{
		"valid":              {"web", func(*Registration) {}, nil},
		"scp-like":           {"web", func(r *Registration) { r.RepoURL = "git@github.com:org/repo.git" }, nil},
		"root path":          {"web", func(r *Registration) { r.Path = "" }, nil},
		"bad name":           {"Web_1", func(*Registration) {}, []string{"name: Invalid value"}},
		"name too long":      {strings.Repeat("a", 60), func(*Registration) {}, []string{"at most 51 characters"}},
		"no repo":            {"web", func(r *Registration) { r.RepoURL = "" }, []string{"repoURL: Required value"}},
		"ftp":                {"web", func(r *Registration) { r.RepoURL = "ftp://h/o/r" }, []string{"repoURL: Invalid value", "scheme"}},
		"embedded password":  {"web", func(r *Registration) { r.RepoURL = "https://u:p@github.com/o/r" }, []string{"must not embed a password"}},
		"no repository path": {"web", func(r *Registration) { r.RepoURL = "https://github.com/" }, []string{"needs a host and a repository path"}},
		"credentials over http": {"web", func(r *Registration) {
			r.RepoURL, r.Credentials = "http://git.example.com/o/r", &Credentials{Type: "github-token", Token: "t"}
		}, []string{"credentials: Forbidden: credentials are never sent over http://"}},
		"no ref":              {"web", func(r *Registration) { r.Ref = " " }, []string{"ref: Required value"}},
		"escaping path":       {"web", func(r *Registration) { r.Path = "deploy/../../etc" }, []string{"path: Invalid value"}},
		"absolute path":       {"web", func(r *Registration) { r.Path = "/etc" }, []string{"path: Invalid value"}},
		"unknown credentials": {"web", func(r *Registration) { r.Credentials = &Credentials{Type: "github-app-tenant"} }, []string{"credentials.type: Unsupported value"}},
		"token missing": {"web", func(r *Registration) { r.Credentials = &Credentials{Type: CredGitHubToken} },
			[]string{"credentials.token: Required value"}},
		"ssh without known hosts": {"web", func(r *Registration) {
			r.Credentials = &Credentials{Type: CredSSHKey, PrivateKey: "k"}
		}, []string{"credentials.knownHosts: Required value"}},
		"hooks skipped":      {"web", func(r *Registration) { r.HelmHooks = "skip" }, nil},
		"unknown hooks":      {"web", func(r *Registration) { r.HelmHooks = "run" }, []string{"helmHooks: Unsupported value"}},
		"poll interval":      {"web", func(r *Registration) { r.ReconcileInterval = "1m" }, nil},
		"bad verify timeout": {"web", func(r *Registration) { r.VerifyTimeout = "x" }, []string{"verifyTimeout: Invalid value"}},
		"bad poll interval":  {"web", func(r *Registration) { r.ReconcileInterval = "-1m" }, []string{"reconcileInterval: Invalid value"}},
		"basic auth": {"web", func(r *Registration) {
			r.Credentials = &Credentials{Type: CredBasicAuth, Username: "u", Password: "p"}
		}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := ok()
			tc.modify(r)
			errs := ValidateRegistration(tc.name, r)
			if tc.want == nil {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).NotTo(BeEmpty())
			for _, w := range tc.want {
				g.Expect(errs.ToAggregate().Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestCredentialsDataIsTheSecretFormat(t *testing.T) {
	g := NewWithT(t)
	d := (&Credentials{Type: CredSSHKey, PrivateKey: "k", KnownHosts: "h"}).Data()
	g.Expect(d).To(HaveKeyWithValue("type", []byte("ssh-key")))
	g.Expect(d).To(HaveKeyWithValue("private-key", []byte("k")))
	g.Expect(d).To(HaveKeyWithValue("known-hosts", []byte("h")))
	g.Expect(d).NotTo(HaveKey("token"))
}

// FuzzValidateRegistration: validation never panics, and an accepted registration stores a target the source
// handler can read back.
func FuzzValidateRegistration(f *testing.F) {
	f.Add("web", "https://github.com/org/repo.git", "main", "deploy")
	f.Add("web", "git@github.com:org/repo", "refs/heads/main", "")
	f.Add("w", "ssh://git@h:22/o/r", "x", "a/../b")
	f.Add("-", "https://u:p@h/o", "", "/abs")
	f.Add("web", "h:", "main", "..")
	f.Add("0", "0:0", "0", "..0")
	f.Fuzz(func(t *testing.T, name, repo, ref, path string) {
		r := &Registration{RepoURL: repo, Ref: ref, Path: path}
		if len(ValidateRegistration(name, r)) > 0 {
			return
		}
		if repo == "" || strings.TrimSpace(ref) == "" || strings.HasPrefix(path, "/") {
			t.Fatalf("accepted %q %q %q", repo, ref, path)
		}
		for _, seg := range strings.Split(path, "/") {
			if seg == ".." { // "..0" is a fine directory name; ".." is not
				t.Fatalf("accepted escaping path %q", path)
			}
		}
	})
}
