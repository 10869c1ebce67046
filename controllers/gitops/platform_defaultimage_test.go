package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// TestPlatformWithoutImageRunsTheOperatorsDefault: a Platform that names no image runs its stages on the
// operator's default (--katastroma-default-image, RELATED_IMAGE_KATASTROMA in the installs, so image mirrors reach
// it), and the default is not written into the spec, so the next operator release moves the stages along.
func TestPlatformWithoutImageRunsTheOperatorsDefault(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	g.Eventually(func(g Gomega) {
		for _, stage := range platform.Stages {
			d := &appsv1.Deployment{}
			get(g, types.NamespacedName{Namespace: ns, Name: platform.Name(stage)}, d)
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(defaultStageImage), stage)
		}
	}).Should(Succeed())
	stored := &gitopsv1alpha1.Platform{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
	g.Expect(stored.Spec.Image).To(BeEmpty(), "the default stays out of the spec")
}
