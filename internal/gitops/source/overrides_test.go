package source

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestOverridesComeOnlyFromTheTargetsOwnSecret: the annotation names a Secret, but only one labelled for this
// target is read, so editing a source target cannot render another Secret of the namespace into objects.
func TestOverridesComeOnlyFromTheTargetsOwnSecret(t *testing.T) {
	g := NewWithT(t)
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-overrides",
		Labels: map[string]string{pipeline.LabelSourceTarget: "web"}}, Data: map[string][]byte{OverridesKey: []byte("a: 1")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db"},
		Data: map[string][]byte{OverridesKey: []byte("password: s3cret")}}
	h := &Handler{Client: fake.NewClientBuilder().WithObjects(own, other).Build()}

	v, err := h.overrides(context.Background(), Target{Namespace: "team", Name: "web", OverridesSecret: "web-overrides"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal("a: 1"))
	_, err = h.overrides(context.Background(), Target{Namespace: "team", Name: "web", OverridesSecret: "db"})
	g.Expect(err).To(MatchError(ContainSubstring("is not labelled katastroma.org/source-target=web")))
}
