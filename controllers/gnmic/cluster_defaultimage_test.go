package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/manager"
)

// TestClusterWithoutImageRunsTheOperatorsDefault: a Cluster that names no image runs the operator's default
// (--gnmic-default-image, RELATED_IMAGE_GNMIC in the installs, so image mirrors reach it), and the default is not
// written into the spec, so the next operator release moves the collectors to its own default.
func TestClusterWithoutImageRunsTheOperatorsDefault(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := cluster(g, ns, "by-default", 1, collectors(t, 1))
	c.Spec.Image = ""
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	want := manager.DefaultOptions().GNMIcDefaultImage
	g.Expect(want).To(HaveSuffix(":0.47.0"))
	sts := &appsv1.StatefulSet{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-by-default"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal(want))
	}).Should(Succeed())
	stored := &gnmicv1alpha1.Cluster{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Name}, stored)).To(Succeed())
	g.Expect(stored.Spec.Image).To(BeEmpty(), "the default stays out of the spec")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Name}, stored)).To(Succeed())
		g.Expect(stored.Status.CollectorVersion).To(Equal("0.47.0"), "the version is read from the image in use")
	}).Should(Succeed())
}
