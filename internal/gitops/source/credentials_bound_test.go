package source

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCredentialsStayWithTheirRepository: a credential Secret registered for one repository is not sent to
// another after someone edits the target's repo-url directly (the ConfigMap's editors are not the credentials'
// owners), nor ever over plain http.
func TestCredentialsStayWithTheirRepository(t *testing.T) {
	g := NewWithT(t)
	secret := func(forURL string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-credentials"}}
		if forURL != "" {
			s.Annotations = map[string]string{AnnotationCredentialsFor: NormalizeRepoURL(forURL)}
		}
		return s
	}
	target := func(url string) Target {
		return Target{Namespace: "team", Name: "web", RepoURL: url, CredentialSecret: "web-credentials"}
	}
	g.Expect(checkCredentialTarget(secret("https://github.com/org/web.git"), target("https://github.com/org/web"))).To(Succeed())
	g.Expect(checkCredentialTarget(secret("https://github.com/org/web.git"), target("https://evil.example.com/org/web.git"))).
		To(MatchError(ContainSubstring("register the credentials again")))
	g.Expect(checkCredentialTarget(secret(""), target("https://github.com/org/web.git"))).
		To(Succeed(), "a Secret registered before the binding existed keeps working")
	g.Expect(checkCredentialTarget(secret("http://git.example.com/org/web.git"), target("http://git.example.com/org/web.git"))).
		To(MatchError(ContainSubstring("never sent over http://")))
}
