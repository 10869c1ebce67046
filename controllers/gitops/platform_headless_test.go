package gitops_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gitops"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// Operators before the balanced stages gave every stage a ClusterIP Service (controlled by the Platform);
// spec.clusterIP is immutable, so the controller replaces such a Service with the headless one the stages' round
// robin needs, and writes every other stage's children too.
func TestPlatformReplacesAClusterIPServiceWithAHeadlessOne(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	p, _ := stalledPlatform(g, ctx, ns)
	old := clusterIPService(ns)
	g.Expect(controllerutil.SetControllerReference(p, old, env.Client.Scheme())).To(Succeed())
	g.Expect(env.Client.Create(ctx, old)).To(Succeed())
	g.Expect(old.Spec.ClusterIP).NotTo(BeEmpty(), "the API server assigned a cluster IP")
	// Now the controller acts on it.
	before := p.DeepCopy()
	p.Spec.CrashTimeout = nil
	g.Expect(env.Client.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
	g.Eventually(func(g Gomega) {
		svc := &corev1.Service{}
		get(g, types.NamespacedName{Namespace: ns, Name: platform.Name("labeler")}, svc)
		g.Expect(svc.UID).NotTo(Equal(old.UID))
		g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		g.Expect(svc.OwnerReferences).To(ContainElement(HaveField("Name", "main")))
		for _, stage := range platform.Stages {
			s := &corev1.Service{}
			get(g, types.NamespacedName{Namespace: ns, Name: platform.Name(stage)}, s)
			if stage == gitopsv1alpha1.StagePharos {
				g.Expect(s.Spec.ClusterIP).NotTo(Equal(corev1.ClusterIPNone), "pharos keeps its cluster IP")
			} else {
				g.Expect(s.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), stage)
			}
			get(g, types.NamespacedName{Namespace: ns, Name: platform.Name(stage)}, &networkingv1.NetworkPolicy{})
		}
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
}

// cachedReconciler is a Platform reconciler reading through its own informer cache, as the manager's does: a
// Service it just deleted stays in that cache for a moment.
func cachedReconciler(t *testing.T, ctx context.Context) *gitops.PlatformReconciler {
	g := NewWithT(t)
	c, err := cluster.New(env.Config, func(o *cluster.Options) { o.Scheme = env.Client.Scheme() })
	g.Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	// Informers start on first use: read once so the Services are watched before the pass.
	g.Eventually(func() error { return c.GetClient().List(ctx, &corev1.ServiceList{}) }).Should(Succeed())
	return &gitops.PlatformReconciler{Client: c.GetClient()}
}

// stalledPlatform is a Platform the suite's controller leaves alone (its spec is refused: crashTimeout below
// leaseStaleAfter), and the valid spec the test's own pass writes, so only that one pass acts.
func stalledPlatform(g Gomega, ctx context.Context, ns string) (stored, valid *gitopsv1alpha1.Platform) {
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	stored = &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1",
			CrashTimeout: &metav1.Duration{Duration: time.Minute}}}
	g.Expect(env.Client.Create(ctx, stored)).To(Succeed())
	valid = stored.DeepCopy()
	valid.Spec.CrashTimeout = nil
	return stored, valid
}

// clusterIPService is the labeler's Service as operators before the balanced stages created it.
func clusterIPService(ns string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: platform.Name("labeler")},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/component": "labeler"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: platform.GRPCPort, TargetPort: intstr.FromString("grpc")}}}}
}

// One pass replaces the labeler's ClusterIP Service and still writes every later stage's Service and
// NetworkPolicy: the replacement is created directly, not through the cache that still holds the deleted one.
func TestPlatformReplacesTheServiceInOnePass(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	stored, valid := stalledPlatform(g, ctx, ns)
	old := clusterIPService(ns)
	g.Expect(controllerutil.SetControllerReference(stored, old, env.Client.Scheme())).To(Succeed())
	g.Expect(env.Client.Create(ctx, old)).To(Succeed())
	r := cachedReconciler(t, ctx)
	g.Eventually(func(g Gomega) {
		g.Expect(r.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Service{})).To(Succeed())
	}).Should(Succeed(), "the cache holds the old Service")

	g.Expect(r.WriteChildren(ctx, valid)).To(Succeed())
	for _, stage := range platform.Stages {
		key := types.NamespacedName{Namespace: ns, Name: platform.Name(stage)}
		svc := &corev1.Service{}
		g.Expect(env.Client.Get(ctx, key, svc)).To(Succeed(), stage)
		g.Expect(env.Client.Get(ctx, key, &networkingv1.NetworkPolicy{})).To(Succeed(), stage)
		if stage == gitopsv1alpha1.StageLabeler {
			g.Expect(svc.UID).NotTo(Equal(old.UID))
			g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
			g.Expect(metav1.IsControlledBy(svc, stored)).To(BeTrue())
		}
	}
	g.Expect(env.Client.Delete(ctx, stored)).To(Succeed())
}

// A ClusterIP Service of that name the Platform does not control is not deleted: the pass reports the conflict.
func TestPlatformKeepsAServiceItDoesNotControl(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	stored, valid := stalledPlatform(g, ctx, ns)
	foreign := clusterIPService(ns)
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	r := cachedReconciler(t, ctx)

	g.Expect(r.WriteChildren(ctx, valid)).To(MatchError(ContainSubstring("not controlled by Platform main")))
	live := &corev1.Service{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), live)).To(Succeed())
	g.Expect(live.UID).To(Equal(foreign.UID), "not deleted")
	g.Expect(live.Spec.ClusterIP).NotTo(Equal(corev1.ClusterIPNone))
	g.Expect(env.Client.Delete(ctx, stored)).To(Succeed())
}
