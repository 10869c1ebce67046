package gitops_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestDeletingTheLastPlatformLetsTenantNamespacesFinish: a deleted source target waits on prune-on-delete for a
// source handler to prune what it deployed. Once the last Platform is deleted no source handler is left, so its
// finalizer releases the targets, and a tenant namespace being deleted finishes (through the namespace controller).
func TestDeletingTheLastPlatformLetsTenantNamespacesFinish(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Earlier tests leave Platforms behind: this one must be the last.
	var left gitopsv1alpha1.PlatformList
	g.Expect(env.Client.List(ctx, &left)).To(Succeed())
	for i := range left.Items {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &left.Items[i]))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, &left)).To(Succeed())
		g.Expect(left.Items).To(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())

	ns := "katastroma-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), got)
		g.Expect(got.Finalizers).NotTo(BeEmpty())
	}).Should(Succeed())

	tenant := "tenant-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})).To(Succeed())
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web",
		Labels:     map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget},
		Finalizers: []string{pipeline.FinalizerPrune}},
		Data: map[string]string{"repo-url": "https://example.com/org/repo", "ref": "main", "path": "deploy"}}
	g.Expect(env.Client.Create(ctx, target)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})).To(Succeed())
	g.Consistently(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(target), &corev1.ConfigMap{})
	}).WithTimeout(2*time.Second).Should(Succeed(), "the target waits for a prune while a Platform runs")

	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: tenant}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant namespace did not finish deleting: %v", err)
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}
