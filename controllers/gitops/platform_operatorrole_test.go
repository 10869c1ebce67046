package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gitops"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// operatorClient is an uncached client acting as a ServiceAccount bound to the manager's generated ClusterRole
// (config/rbac/gitops/role.yaml, what `make manifests` derives from the gitops markers): the operator as installed, not admin.
func operatorClient(t *testing.T, g Gomega) client.Client {
	ctx := context.Background()
	ns := "operator-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controller-manager"}}
	g.Expect(env.Client.Create(ctx, sa)).To(Succeed())
	objs, err := testenv.OperatorRoles("config/rbac/gitops/role.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	role := objs[0].(*rbacv1.ClusterRole)
	role.ObjectMeta = metav1.ObjectMeta{Name: ns + "-manager-role"}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	g.Expect(env.Client.Create(ctx, crb)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, crb)
		_ = env.Client.Delete(ctx, role)
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa.Name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestPlatformControllerBindsOnlyTheShippedRoles runs the Platform controller with the operator's own rules: it
// adds its stage ServiceAccounts to the shared, fixed-name ClusterRoleBindings of the shipped ClusterRoles (no
// escalate, no ClusterRole of its own), replaces the pharos Role an earlier version wrote with the shipped one,
// and its finalizer removes its subjects and nothing else. The operator can bind no other ClusterRole and change
// no other ClusterRoleBinding.
func TestPlatformControllerBindsOnlyTheShippedRoles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(testenv.ApplyShippedClusterRoles(ctx, env.Client)).To(Succeed())
	asOperator := operatorClient(t, g)
	ns, tenantNS := "katastroma-"+suffix(), "team-"+suffix()
	// A tenant namespace its Tenant has claimed, while the manager still runs the Tenant controller.
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS,
		Labels:      map[string]string{gitopsv1alpha1.LabelTenant: tenantNS},
		Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: tenantNS}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, newTenant(tenantNS, tenantNS))).To(Succeed())
	g.Eventually(func(g Gomega) { readyTenant(g, tenantNS) }).Should(Succeed())
	// The shared manager reconciles Platforms as admin, which would make any refused write pass unseen.
	g.Expect(env.StopManager()).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(env.StartManager()).To(Succeed()) })
	r := &gitops.PlatformReconciler{Client: asOperator}

	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	// What an earlier version left: pharos's own Role, bound under the name the binding keeps.
	pharos := platform.Name(gitopsv1alpha1.StagePharos)
	configMapReads := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pharos}, Rules: configMapReads})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pharos},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: pharos},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: pharos, Namespace: ns}}})).To(Succeed())

	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}
	g.Eventually(func() error { // the cached client starts empty; a conflict on a shared binding is retried
		_, err := r.Reconcile(ctx, req)
		return err
	}).Should(Succeed(), "reconciling as the operator's ServiceAccount")
	// Renderer and pharos: the caller-check role every stage without another one gets to authenticate its callers.
	for _, stage := range []string{gitopsv1alpha1.StageSource, gitopsv1alpha1.StageProvisioner, gitopsv1alpha1.StagePruner,
		gitopsv1alpha1.StageRenderer, gitopsv1alpha1.StagePharos} {
		crb := &rbacv1.ClusterRoleBinding{}
		get(g, types.NamespacedName{Name: platform.SharedBindingName(stage)}, crb)
		g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole",
			Name: platform.StageClusterRole(stage)}), stage)
		g.Expect(crb.Subjects).To(ContainElement(platform.StageSubject(p, stage)), stage)
	}
	rb := &rbacv1.RoleBinding{}
	get(g, types.NamespacedName{Namespace: ns, Name: pharos}, rb)
	g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: platform.PharosClusterRole}))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pharos}, &rbacv1.Role{}))).
		To(BeTrue(), "the earlier pharos Role is deleted")
	get(g, types.NamespacedName{Namespace: tenantNS, Name: platform.ClusterName(p, gitopsv1alpha1.StageSource)}, rb)
	g.Expect(rb.RoleRef.Name).To(Equal(platform.SourceTenantClusterRole))

	// bind is granted by name only: no other ClusterRole granting what the operator itself lacks (here the
	// provisioner stage's impersonation) can be bound, in the cluster or in a namespace, and none can be created;
	// no ClusterRoleBinding but the shared ones can be changed.
	other := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "not-shipped-" + suffix()},
		Rules: platform.ShippedRules(platform.ProvisionerClusterRole)}
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: other.Name}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "x", Namespace: ns}}
	err := asOperator.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: other.Name}, RoleRef: ref, Subjects: subjects})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding a ClusterRole that is not shipped: %v", err)
	err = asOperator.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: other.Name}, RoleRef: ref, Subjects: subjects})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding a ClusterRole that is not shipped in a namespace: %v", err)
	err = asOperator.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "made-" + suffix()}, Rules: configMapReads})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a ClusterRole: %v", err)
	err = asOperator.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"}}, client.DryRunAll)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting a ClusterRoleBinding that is not shared: %v", err)

	// The finalizer, as the operator, removes its subjects and the tenant bindings and lets the Platform go.
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func() error {
		_, err := r.Reconcile(ctx, req)
		return err
	}).Should(Succeed(), "finalizing as the operator's ServiceAccount")
	for _, stage := range []string{gitopsv1alpha1.StageSource, gitopsv1alpha1.StageProvisioner, gitopsv1alpha1.StagePruner} {
		// Gone with its last subject, or left to the other Platforms of the suite.
		crb := &rbacv1.ClusterRoleBinding{}
		err := env.Client.Get(ctx, types.NamespacedName{Name: platform.SharedBindingName(stage)}, crb)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(crb.Subjects).NotTo(ContainElement(platform.StageSubject(p, stage)), stage)
		if err == nil {
			g.Expect(crb.Subjects).NotTo(BeEmpty(), "%s: a binding without subjects is deleted", stage)
		}
	}
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: tenantNS, Name: platform.ClusterName(p, gitopsv1alpha1.StageSource)}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "tenant RoleBinding: %v", err)
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, req.NamespacedName, &gitopsv1alpha1.Platform{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
}

// TestPlatformNamespacesFlag: with --gitops-platform-namespaces set, a Platform elsewhere is Stalled, naming the
// namespaces allowed, and gets no stage (so its ServiceAccounts are bound nowhere).
func TestPlatformNamespacesFlag(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.StopManager()).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(env.StartManager()).To(Succeed()) })
	r := &gitops.PlatformReconciler{Client: env.Client, AllowedNamespaces: []string{"katastroma-system"}}
	ns := "elsewhere-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	g.Expect(err).NotTo(HaveOccurred())
	get(g, client.ObjectKeyFromObject(p), p)
	g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", gitopsv1alpha1.ConditionStalled),
		HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("only in katastroma-system")))))
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: platform.Name(gitopsv1alpha1.StageSource)}, &corev1.ServiceAccount{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no stage is deployed: %v", err)
}
