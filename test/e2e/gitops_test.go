package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gitops"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// Deleting a Platform cascades as docs/gitops.md says: its finalizer removes the cluster-scoped RBAC it created,
// and the garbage collector removes the namespaced children (owner references) and, through the ReplicaSets,
// the stage pods the simulated kubelet ran.
func TestPlatformDeletionCascades(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Platform{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gitopsv1alpha1.ConditionReady)).To(BeTrue(),
			"every stage Deployment Available through the Deployment controller and the simulated kubelet")
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(len(pods.Items)).To(BeNumerically(">=", len(platform.Stages)))
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &gitopsv1alpha1.Platform{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Platform's finalizer ran")
		for _, stage := range []string{"provisioner", "pruner"} {
			err = env.Client.Get(ctx, types.NamespacedName{Name: platform.ClusterName(p, stage)}, &rbacv1.ClusterRoleBinding{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "cluster RBAC of %s", stage)
		}
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.ReplicaSetList{}, &corev1.ServiceList{},
			&corev1.PodList{}, &networkingv1.NetworkPolicyList{}, &corev1.ConfigMapList{}} {
			g.Expect(env.Client.List(ctx, list, client.InNamespace(ns),
				client.MatchingLabels{"app.kubernetes.io/name": "katastroma", "app.kubernetes.io/instance": p.Name})).To(Succeed())
			g.Expect(meta.LenList(list)).To(BeZero(), "%T left in %s", list, ns)
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

// Offboarding a Tenant deletes the namespaces it created (marked by annotation); the namespace controller
// finishes each deletion, so the namespace and everything in it are gone.
func TestTenantOffboardingDeletesCreatedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := "tenant-" + rand.String(5)
	created := name + "-dev"
	tenant := &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{created}}}
	g.Expect(env.Client.Create(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Tenant{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tenant), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gitopsv1alpha1.ConditionReady)).To(BeTrue())
		ns := &corev1.Namespace{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Name: created}, ns)).To(Succeed())
		g.Expect(ns.Annotations).To(HaveKeyWithValue(gitops.AnnotationCreatedBy, name))
	}).WithTimeout(time.Minute).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(tenant), &gitopsv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		err = env.Client.Get(ctx, types.NamespacedName{Name: created}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}
