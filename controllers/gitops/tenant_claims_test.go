package gitops_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// granted is an existing namespace an administrator handed to tenant: labelled and marked granted-to.
func granted(tenant string) map[string]string {
	return map[string]string{gitopsv1alpha1.AnnotationGrantedTo: tenant}
}

// TestTenantCannotClaimByName: the Platform's namespace and a namespace whose ServiceAccounts hold cluster-wide
// rights are refused by what they are, even when an administrator labelled and marked them for the tenant.
func TestTenantCannotClaimByName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := "claim-" + suffix()
	platformNS := "plat-" + suffix()
	labels := map[string]string{gitopsv1alpha1.LabelTenant: name}
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS, Labels: labels,
		Annotations: granted(name)}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, p) })
	err := env.Client.Create(ctx, newTenant(name, platformNS))
	g.Expect(err).To(MatchError(ContainSubstring("namespace " + platformNS + " holds the gitops Platform main")))

	monitoring := "mon-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monitoring, Labels: labels,
		Annotations: granted(name)}})).To(Succeed())
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: monitoring + "-prometheus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: monitoring}}}
	g.Expect(env.Client.Create(ctx, crb)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, crb) })
	err = env.Client.Create(ctx, newTenant(name, monitoring))
	g.Expect(err).To(MatchError(ContainSubstring("ClusterRoleBinding " + crb.Name)))

	// The controller decides the same way (admission may be off, or a namespace change after the claim): a
	// Platform created in a namespace the Tenant holds stalls the Tenant, naming why.
	held := "held-" + suffix()
	g.Expect(env.Client.Create(ctx, newTenant(held, held))).To(Succeed())
	g.Eventually(func(g Gomega) { readyTenant(g, held) }).Should(Succeed())
	intruder := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: held, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, intruder)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, intruder) })
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: held}, got)
		c := meta.FindStatusCondition(got.Status.Conditions, gitopsv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(gitopsv1alpha1.ReasonNamespaceReserved))
		g.Expect(c.Message).To(ContainSubstring("holds the gitops Platform main"))
	}).Should(Succeed())

	// Tenants cannot ask to write Namespace objects.
	bad := newTenant(name, name)
	bad.Spec.Resources = []gitopsv1alpha1.TenantResource{{APIGroups: []string{""}, Resources: []string{"namespaces"}}}
	g.Expect(env.Client.Create(ctx, bad)).To(MatchError(ContainSubstring("tenants may not write Namespace objects")))
	// Nor for privileged pods, without the operator's flag.
	priv := newTenant(name, name)
	priv.Spec.PodSecurity = "privileged"
	g.Expect(env.Client.Create(ctx, priv)).To(MatchError(ContainSubstring("spec.podSecurity: Forbidden")))
}

// TestTenantNamespaceRoleBindingsFollowTheClaim: a namespace created with a tenant label gets no pipeline
// RoleBinding (the Platform's source stage included) until a Tenant claims it.
func TestTenantNamespaceRoleBindingsFollowTheClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(testenv.ApplyShippedClusterRoles(ctx, env.Client)).To(Succeed())
	platformNS, name := "plat-"+suffix(), "early-"+suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, p) })
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: name}, Annotations: granted(name)}})).To(Succeed())
	sourceKey := types.NamespacedName{Namespace: name, Name: platform.ClusterName(p, gitopsv1alpha1.StageSource)}
	g.Eventually(func(g Gomega) { // the Platform has reconciled since the namespace appeared
		got := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), got)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, sourceKey, &rbacv1.RoleBinding{}))
	}).WithTimeout(3*time.Second).Should(BeTrue(), "a tenant label alone is no claim")

	g.Expect(env.Client.Create(ctx, newTenant(name, name))).To(Succeed())
	g.Eventually(func(g Gomega) {
		readyTenant(g, name)
		get(g, sourceKey, &rbacv1.RoleBinding{})
	}).Should(Succeed())
}

// TestTenantReportsNamespacesWithoutProof: a namespace carrying the tenant's label but neither created by the Tenant
// nor marked granted-to (what an earlier version left after taking it over) keeps working and is reported by name
// until an administrator marks it.
func TestTenantReportsNamespacesWithoutProof(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := "legacy-" + suffix()
	old := name + "-old"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: old,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: name}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, newTenant(name, name, old))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := readyTenant(g, name)
		g.Expect(got.Status.Namespaces).To(ConsistOf(name, old), "it keeps working")
		c := meta.FindStatusCondition(got.Status.Conditions, gitopsv1alpha1.ConditionClaimsProven)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(gitopsv1alpha1.ReasonNamespaceNotMarked))
		g.Expect(c.Message).To(ContainSubstring(old))
		g.Expect(c.Message).NotTo(ContainSubstring(name + ",")) // the namespace it created is proven
	}).Should(Succeed())

	ns := &corev1.Namespace{}
	get(g, types.NamespacedName{Name: old}, ns)
	ns.Annotations = granted(name)
	g.Expect(env.Client.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := readyTenant(g, name)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gitopsv1alpha1.ConditionClaimsProven)).To(BeTrue())
	}).Should(Succeed())
}

// TestTenantNamespacesEnforcePodSecurity: every namespace a Tenant creates enforces restricted (or the baseline
// the Tenant asks for), the API server then refuses a privileged pod there; a namespace held without the label
// gets it, and a level an administrator set is kept.
func TestTenantNamespacesEnforcePodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := "psa-" + suffix()
	edited := name + "-edited"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: edited,
		Labels:      map[string]string{gitopsv1alpha1.LabelTenant: name, gitopsv1alpha1.LabelPodSecurityEnforce: "baseline"},
		Annotations: granted(name)}})).To(Succeed())
	bare := name + "-bare"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bare,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: name}, Annotations: granted(name)}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, newTenant(name, name, edited, bare))).To(Succeed())
	low := "low-" + suffix()
	lt := newTenant(low, low)
	lt.Spec.PodSecurity = "baseline"
	g.Expect(env.Client.Create(ctx, lt)).To(Succeed())

	g.Eventually(func(g Gomega) {
		readyTenant(g, name)
		readyTenant(g, low)
		for ns, level := range map[string]string{name: "restricted", bare: "restricted", edited: "baseline", low: "baseline"} {
			got := &corev1.Namespace{}
			get(g, types.NamespacedName{Name: ns}, got)
			g.Expect(got.Labels).To(HaveKeyWithValue(gitopsv1alpha1.LabelPodSecurityEnforce, level), ns)
		}
	}).Should(Succeed())

	privileged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "root"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "example.com/x:1",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
		Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}}
	// Eventually: until the controller-manager made the namespace's default ServiceAccount, admission stops earlier.
	g.Eventually(func(g Gomega) {
		err := env.Client.Create(ctx, privileged.DeepCopy())
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err).To(MatchError(ContainSubstring("violates PodSecurity")))
	}).Should(Succeed())
}

// TestTenantKeepsANamespaceGrantedBeforeItsClaim: a namespace an administrator labels for a Tenant that does not
// list it yet stays labelled (the controller used to release it at once, which let another tenant's claim in:
// TestTenantAdmission's flake); once the Tenant listed it and set it up, dropping it from the spec releases it.
func TestTenantKeepsANamespaceGrantedBeforeItsClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a := "grant-" + suffix()
	g.Expect(env.Client.Create(ctx, newTenant(a, a))).To(Succeed())
	g.Eventually(func(g Gomega) { readyTenant(g, a) }).Should(Succeed())

	pending := a + "-pending"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pending,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: a}, Annotations: granted(a)}})).To(Succeed())
	g.Consistently(func(g Gomega) {
		ns := &corev1.Namespace{}
		get(g, types.NamespacedName{Name: pending}, ns)
		g.Expect(ns.Labels).To(HaveKeyWithValue(gitopsv1alpha1.LabelTenant, a), "the grant was released before its claim")
	}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
	err := env.Client.Create(ctx, newTenant("other-"+suffix(), pending))
	g.Expect(err).To(MatchError(ContainSubstring("belongs to tenant " + a)))

	// The claim: the Tenant lists it and sets it up.
	g.Eventually(func(g Gomega) {
		ta := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: a}, ta)
		ta.Spec.Namespaces = []string{a, pending}
		g.Expect(env.Client.Update(ctx, ta)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(readyTenant(g, a).Status.Namespaces).To(ContainElement(pending))
	}).Should(Succeed())

	// Dropped from the spec, the namespace it held is released.
	g.Eventually(func(g Gomega) {
		ta := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: a}, ta)
		ta.Spec.Namespaces = []string{a}
		g.Expect(env.Client.Update(ctx, ta)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		get(g, types.NamespacedName{Name: pending}, ns)
		g.Expect(ns.Labels).NotTo(HaveKey(gitopsv1alpha1.LabelTenant))
	}).Should(Succeed())
}
