package source

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationCredentialsFor is, on a credential Secret the registration API wrote, the (normalised) repository URL
// the credentials were registered for. The target's repo-url lives in a ConfigMap whose editors need not be the
// credentials' owners: a changed repo-url must not carry the token to another host, so credentials go only to the
// repository they were registered for, and a new repository needs the credentials registered again.
const AnnotationCredentialsFor = "katastroma.org/credentials-for"

// plaintextURL reports whether a clone URL sends what it carries unencrypted.
func plaintextURL(raw string) bool {
	s := strings.ToLower(strings.TrimSpace(raw))
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "git://")
}

// checkCredentialTarget refuses to use s for t when s was registered for another repository or t's URL is
// plaintext. A Secret without the annotation (registered before it existed) is used as before.
func checkCredentialTarget(s *corev1.Secret, t Target) error {
	if plaintextURL(t.RepoURL) {
		return fmt.Errorf("source target %s/%s: credentials are never sent over http:// or git://: use https or ssh", t.Namespace, t.Name)
	}
	registered, ok := s.Annotations[AnnotationCredentialsFor]
	if ok && registered != NormalizeRepoURL(t.RepoURL) {
		return fmt.Errorf("source target %s/%s: credential Secret %s was registered for another repository than repo-url: "+
			"register the credentials again for the new repository", t.Namespace, t.Name, s.Name)
	}
	return nil
}
