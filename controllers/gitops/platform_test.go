package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

func TestPlatformDeploysScalesAndRepairs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	// Every child exists, owned by the Platform.
	g.Eventually(func(g Gomega) {
		for _, stage := range platform.Stages {
			key := types.NamespacedName{Namespace: ns, Name: platform.Name(stage)}
			for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{},
				&networkingv1.NetworkPolicy{}} {
				get(g, key, obj)
				g.Expect(obj.GetOwnerReferences()).To(ContainElement(HaveField("Name", "main")), "%T %s", obj, key)
			}
			if stage != gitopsv1alpha1.StagePharos {
				pdb := &policyv1.PodDisruptionBudget{}
				get(g, key, pdb)
				g.Expect(pdb.GetOwnerReferences()).To(ContainElement(HaveField("Name", "main")), "PodDisruptionBudget %s", key)
				g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))), key.String())
			}
		}
		get(g, types.NamespacedName{Namespace: ns, Name: platform.CollectorConfigMapName}, &corev1.ConfigMap{})
		get(g, types.NamespacedName{Namespace: ns, Name: platform.Name("pharos")}, &rbacv1.RoleBinding{})
		crb := &rbacv1.ClusterRoleBinding{}
		get(g, types.NamespacedName{Name: platform.SharedBindingName("provisioner")}, crb)
		g.Expect(crb.RoleRef.Name).To(Equal(platform.ProvisionerClusterRole))
		g.Expect(crb.Subjects).To(ContainElement(platform.StageSubject(p, "provisioner")))
		get(g, types.NamespacedName{Name: platform.SharedBindingName("pruner")}, crb)
		g.Expect(crb.Subjects).To(ContainElement(platform.StageSubject(p, "pruner")))
		got := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), got)
		g.Expect(got.Status.Stages).To(HaveLen(len(platform.Stages)))
	}).Should(Succeed())

	// Rolled out by the Deployment controller and the simulated kubelet: Ready, with per-stage ready replicas and
	// endpoints.
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), got)
		g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", gitopsv1alpha1.ConditionReady),
			HaveField("Status", metav1.ConditionTrue))))
		g.Expect(got.Status.Stages).To(ContainElement(gitopsv1alpha1.StageStatus{Name: "source", Replicas: 1,
			ReadyReplicas: 1, Endpoint: "katastroma-source." + ns + ".svc:50051"}))
		g.Expect(got.Status.WebhookEndpoint).To(Equal("http://katastroma-source." + ns + ".svc:8080"))
	}).Should(Succeed())

	// Scaling a stage is one field.
	update := func(change func(*gitopsv1alpha1.Platform)) {
		g.Eventually(func(g Gomega) { // the controller's status patches move the resourceVersion
			got := &gitopsv1alpha1.Platform{}
			get(g, client.ObjectKeyFromObject(p), got)
			change(got)
			g.Expect(env.Client.Update(ctx, got)).To(Succeed())
		}).Should(Succeed())
	}
	update(func(p *gitopsv1alpha1.Platform) { p.Spec.Stages.Renderer.Replicas = ptr.To[int32](3) })
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		get(g, types.NamespacedName{Namespace: ns, Name: platform.Name("renderer")}, d)
		g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
		fresh := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), fresh)
		g.Expect(fresh.Status.Stages).To(ContainElement(And(HaveField("Name", "renderer"), HaveField("Replicas", BeEquivalentTo(3)),
			HaveField("ReadyReplicas", BeEquivalentTo(3)))))
		g.Expect(fresh.Status.Conditions).To(ContainElement(And(HaveField("Type", gitopsv1alpha1.ConditionReady),
			HaveField("Status", metav1.ConditionTrue))))
	}).Should(Succeed())

	// A child deleted out of band is put back.
	svc := &corev1.Service{}
	get(g, types.NamespacedName{Namespace: ns, Name: platform.Name("orderer")}, svc)
	g.Expect(env.Client.Delete(ctx, svc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fresh := &corev1.Service{}
		get(g, client.ObjectKeyFromObject(svc), fresh)
		g.Expect(fresh.UID).NotTo(Equal(svc.UID))
	}).Should(Succeed())

	// A crash timeout below the lease expiry is refused with the field named.
	update(func(p *gitopsv1alpha1.Platform) {
		g.Expect(p.Spec.LeaseStaleAfter).NotTo(BeNil(), "defaulted by the CRD")
		p.Spec.CrashTimeout = &metav1.Duration{Duration: p.Spec.LeaseStaleAfter.Duration / 2}
	})
	g.Eventually(func(g Gomega) {
		fresh := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), fresh)
		g.Expect(fresh.Status.Conditions).To(ContainElement(And(HaveField("Type", gitopsv1alpha1.ConditionStalled),
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("spec.crashTimeout")))))
	}).Should(Succeed())
	// Deletion and its cascade are observed in test/e2e (TestPlatformDeletionCascades).
}
