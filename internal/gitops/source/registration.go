package source

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quartet-dev/quartet-operator/internal/gitops/renderer"
)

// Registration is what a tenant sends to register (or replace) a source target.
type Registration struct {
	RepoURL   string `json:"repoURL"`
	Ref       string `json:"ref"`
	Path      string `json:"path"`
	Overrides string `json:"overrides,omitempty"`
	// HelmHooks is data.helm-hooks: "refuse" (the default) or "skip".
	HelmHooks string `json:"helmHooks,omitempty"`
	// ReconcileInterval is data.reconcile-interval, the poll interval (a Go duration; "0" turns polls off).
	ReconcileInterval string `json:"reconcileInterval,omitempty"`
	// VerifyTimeout is data.verify-timeout, this target's health verify timeout.
	VerifyTimeout string `json:"verifyTimeout,omitempty"`
	// Credentials, when set, are stored in the Secret <name>-credentials and referenced from the target.
	Credentials *Credentials `json:"credentials,omitempty"`
	// RenamedFrom names the source target of the same namespace this one replaces (the annotation
	// katastroma.org/renamed-from): it takes that target's objects and inventory over, and that target's deletion
	// prunes nothing. The caller must be allowed to delete the predecessor (registration_rename.go).
	RenamedFrom string `json:"renamedFrom,omitempty"`
}

// Credentials are git credentials in the credential Secret format the source handler reads (docs/gitops.md).
type Credentials struct {
	Type       string `json:"type"`
	Token      string `json:"token,omitempty"`
	Username   string `json:"username,omitempty"`
	Password   string `json:"password,omitempty"`
	PrivateKey string `json:"privateKey,omitempty"`
	Passphrase string `json:"passphrase,omitempty"`
	KnownHosts string `json:"knownHosts,omitempty"`
}

// CredentialSecretSuffix names a target's credential Secret: <target>-credentials.
const CredentialSecretSuffix = "-credentials"

// Data is the credential Secret's data.
func (c *Credentials) Data() map[string][]byte {
	d := map[string][]byte{"type": []byte(c.Type)}
	for k, v := range map[string]string{"token": c.Token, "username": c.Username, "password": c.Password,
		"private-key": c.PrivateKey, "passphrase": c.Passphrase, "known-hosts": c.KnownHosts} {
		if v != "" {
			d[k] = []byte(v)
		}
	}
	return d
}

// ValidateRegistration checks a registration before anything is stored; messages name the field.
func ValidateRegistration(name string, r *Registration) field.ErrorList {
	var errs field.ErrorList
	// The credential Secret's name must stay a valid name too.
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 || len(name) > 63-len(CredentialSecretSuffix) {
		errs = append(errs, field.Invalid(field.NewPath("name"), name,
			fmt.Sprintf("a DNS label of at most %d characters", 63-len(CredentialSecretSuffix))))
	}
	if r.RepoURL == "" {
		errs = append(errs, field.Required(field.NewPath("repoURL"), "the clone URL"))
	} else if msg := checkRepoURL(r.RepoURL); msg != "" {
		errs = append(errs, field.Invalid(field.NewPath("repoURL"), r.RepoURL, msg))
	}
	if r.Credentials != nil && plaintextURL(r.RepoURL) {
		errs = append(errs, field.Forbidden(field.NewPath("credentials"), "credentials are never sent over http:// or git://: use an https or ssh repoURL"))
	}
	if strings.TrimSpace(r.Ref) == "" {
		errs = append(errs, field.Required(field.NewPath("ref"), "a branch or full ref"))
	}
	if strings.HasPrefix(strings.TrimSpace(r.Path), "/") || strings.Contains("/"+r.Path+"/", "/../") {
		errs = append(errs, field.Invalid(field.NewPath("path"), r.Path, "a relative path inside the repository"))
	}
	switch r.HelmHooks {
	case "", renderer.HooksRefuse, renderer.HooksSkip:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("helmHooks"), r.HelmHooks,
			[]string{renderer.HooksRefuse, renderer.HooksSkip}))
	}
	if v := r.ReconcileInterval; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			errs = append(errs, field.Invalid(field.NewPath("reconcileInterval"), v, "a non-negative Go duration (0 turns polls off)"))
		}
	}
	if v := r.VerifyTimeout; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			errs = append(errs, field.Invalid(field.NewPath("verifyTimeout"), v, "a non-negative Go duration (0 turns the verify off)"))
		}
	}
	if v := r.RenamedFrom; v != "" {
		p := field.NewPath("renamedFrom")
		switch {
		case strings.Contains(v, "/"):
			errs = append(errs, field.Invalid(p, v, "the name of a source target of the same namespace: a target "+
				"cannot take over another namespace's objects"))
		case v == name:
			errs = append(errs, field.Invalid(p, v, "a source target cannot replace itself"))
		case len(validation.IsDNS1123Subdomain(v)) > 0:
			errs = append(errs, field.Invalid(p, v, "a source target name"))
		}
	}
	if c := r.Credentials; c != nil {
		p := field.NewPath("credentials")
		need := map[string][]string{CredGitHubToken: {"token"}, CredBasicAuth: {"username", "password"},
			CredSSHKey: {"privateKey", "knownHosts"}}
		keys, ok := need[c.Type]
		if !ok {
			errs = append(errs, field.NotSupported(p.Child("type"), c.Type, []string{CredGitHubToken, CredBasicAuth, CredSSHKey}))
		}
		have := map[string]string{"token": c.Token, "username": c.Username, "password": c.Password,
			"privateKey": c.PrivateKey, "knownHosts": c.KnownHosts}
		for _, k := range keys {
			if have[k] == "" {
				errs = append(errs, field.Required(p.Child(k), "needed by type "+c.Type))
			}
		}
	}
	return errs
}

// checkRepoURL accepts the clone URL forms matching understands and refuses embedded passwords, which belong in
// the credential Secret rather than in a ConfigMap every reader of the namespace sees.
func checkRepoURL(raw string) string {
	if strings.ContainsAny(raw, " \t\n") {
		return "must not contain whitespace"
	}
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			return "not a URL: " + err.Error()
		case u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git":
			return "scheme must be https, http, ssh or git"
		case u.Hostname() == "" || strings.Trim(u.Path, "/") == "":
			return "needs a host and a repository path"
		}
		if _, has := u.User.Password(); has {
			return "must not embed a password: use credentials"
		}
		return ""
	}
	host, p, ok := strings.Cut(raw, ":")
	if !ok || strings.Contains(host, "/") || host == "" || strings.Trim(p, "/") == "" || strings.HasSuffix(host, "@") {
		return "not a clone URL: want https://host/owner/repo, ssh://, git:// or user@host:owner/repo"
	}
	return ""
}
