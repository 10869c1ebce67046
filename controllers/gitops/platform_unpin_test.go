package gitops_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestDeletingAPlatformUnpinsItsTargets: source targets pinned to a Platform (katastroma.org/served-by) would be
// served by nobody once it is gone, since every other Platform leaves them alone. Its finalizer unpins them, so
// the remaining Platform takes them over; targets pinned to the remaining Platform keep their pin, and no
// prune-on-delete finalizer is released while a Platform remains.
func TestDeletingAPlatformUnpinsItsTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	var platforms []*gitopsv1alpha1.Platform
	for _, name := range []string{"a", "b"} {
		p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := &gitopsv1alpha1.Platform{}
			get(g, client.ObjectKeyFromObject(p), got)
			g.Expect(got.Finalizers).NotTo(BeEmpty())
		}).Should(Succeed())
		platforms = append(platforms, p)
	}
	defer func() {
		for _, p := range platforms {
			_ = client.IgnoreNotFound(env.Client.Delete(ctx, p))
		}
	}()

	tenant := "tenant-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})).To(Succeed())
	target := func(name, servedBy string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name,
			Labels:      map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget},
			Annotations: map[string]string{pipeline.AnnotationServedBy: servedBy},
			Finalizers:  []string{pipeline.FinalizerPrune}},
			Data: map[string]string{"repo-url": "https://example.com/org/repo", "ref": "main", "path": name}}
		g.Expect(env.Client.Create(ctx, cm)).To(Succeed())
		return cm
	}
	onA, onB := target("on-a", ns+"/a"), target("on-b", ns+"/b")

	g.Expect(env.Client.Delete(ctx, platforms[0])).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		get(g, client.ObjectKeyFromObject(onA), cm)
		g.Expect(cm.Annotations).NotTo(HaveKey(pipeline.AnnotationServedBy), "the deleted Platform's pin stays")
		g.Expect(cm.Finalizers).To(ContainElement(pipeline.FinalizerPrune), "Platform b still prunes it")
	}).WithTimeout(time.Minute).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(onB), cm)).To(Succeed())
	g.Expect(cm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationServedBy, ns+"/b"))
	g.Expect(cm.Finalizers).To(ContainElement(pipeline.FinalizerPrune))
}
