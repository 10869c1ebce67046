package gitops_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gitops"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	gitopswebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/gitops"
)

func newTenant(name string, namespaces ...string) *gitopsv1alpha1.Tenant {
	return &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gitopsv1alpha1.TenantSpec{Namespaces: namespaces}}
}

func suffix() string { return rand.String(5) }

func get(g Gomega, key types.NamespacedName, obj client.Object) {
	g.Expect(env.Client.Get(context.Background(), key, obj)).To(Succeed())
}

func readyTenant(g Gomega, name string) *gitopsv1alpha1.Tenant {
	t := &gitopsv1alpha1.Tenant{}
	get(g, types.NamespacedName{Name: name}, t)
	g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
	g.Expect(t.Status.Conditions).To(ContainElement(And(HaveField("Type", gitopsv1alpha1.ConditionReady),
		HaveField("Status", metav1.ConditionTrue))))
	return t
}

// installNamespaceGuard registers the namespace tenant-label guard the way config/webhook/namespace_tenant_patch.yaml
// does, pointed at the test manager's webhook server (the test environment installs only the generated manifests).
func installNamespaceGuard(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	serving := env.WebhookServing()
	url := fmt.Sprintf("https://%s%s", net.JoinHostPort(serving.LocalServingHost, strconv.Itoa(serving.LocalServingPort)),
		gitopswebhooks.NamespacePath)
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "namespace-tenant-label-" + suffix()},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "vnamespace-tenant-label.katastroma.org",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: serving.LocalServingCAData},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"namespaces"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: gitopsv1alpha1.LabelTenant, Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	NewWithT(t).Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
}

func TestTenantOnboardingRepairAndOffboarding(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := "team-" + suffix()
	g.Expect(testenv.ApplyShippedClusterRoles(ctx, env.Client)).To(Succeed())
	adopted := name + "-existing"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adopted}})).To(Succeed())
	tn := newTenant(name, name+"-prod", adopted)
	g.Expect(env.Client.Create(ctx, tn)).To(Succeed())

	// An existing namespace nobody handed over is not taken: the operator does not label it itself.
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: name}, got)
		c := meta.FindStatusCondition(got.Status.Conditions, gitopsv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(gitopsv1alpha1.ReasonNamespaceNotGiven))
		g.Expect(c.Message).To(ContainSubstring("labelling it " + gitopsv1alpha1.LabelTenant + "=" + name))
	}).Should(Succeed())
	// An administrator hands it over.
	handOver := &corev1.Namespace{}
	get(g, types.NamespacedName{Name: adopted}, handOver)
	handOver.Labels = map[string]string{gitopsv1alpha1.LabelTenant: name}
	g.Expect(env.Client.Update(ctx, handOver)).To(Succeed())

	var secret []byte
	g.Eventually(func(g Gomega) {
		got := readyTenant(g, name)
		g.Expect(got.Status.Namespaces).To(ConsistOf(name+"-prod", adopted))
		g.Expect(got.Finalizers).To(ContainElement(gitops.TenantFinalizer))
		for _, nsName := range got.Spec.Namespaces {
			ns := &corev1.Namespace{}
			get(g, types.NamespacedName{Name: nsName}, ns)
			g.Expect(ns.Labels).To(HaveKeyWithValue(gitopsv1alpha1.LabelTenant, name))
			if nsName == adopted { // it existed before the Tenant: never owned, so never deleted by it
				g.Expect(ns.OwnerReferences).To(BeEmpty())
			} else {
				g.Expect(metav1.GetControllerOf(ns)).To(HaveField("UID", got.UID))
				g.Expect(ns.Annotations).To(HaveKeyWithValue(gitops.AnnotationCreatedBy, name))
			}
			for sa, role := range map[string]string{"provisioner": platform.TenantProvisionerClusterRole, "pruner": platform.TenantPrunerClusterRole} {
				get(g, types.NamespacedName{Namespace: nsName, Name: sa}, &corev1.ServiceAccount{})
				rb := &rbacv1.RoleBinding{}
				get(g, types.NamespacedName{Namespace: nsName, Name: "katastroma-" + sa}, rb)
				g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}))
				g.Expect(rb.Subjects).To(ConsistOf(HaveField("Name", sa)))
			}
			s := &corev1.Secret{}
			get(g, types.NamespacedName{Namespace: nsName, Name: gitopsv1alpha1.WebhookSecretName}, s)
			g.Expect(s.Data[gitopsv1alpha1.WebhookSecretKey]).To(HaveLen(64))
			if nsName == adopted {
				secret = s.Data[gitopsv1alpha1.WebhookSecretKey]
			}
		}
	}).Should(Succeed())

	// The identities are what the pipeline impersonates: the provisioner reads and writes what the tenant may
	// deploy, and reads nothing else.
	prov := rest.CopyConfig(env.Config)
	prov.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + adopted + ":provisioner"}
	pc, err := client.New(prov, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: adopted, Name: "deployed"}}
	g.Expect(pc.Create(ctx, cm)).To(Succeed())
	g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
	g.Expect(apierrors.IsForbidden(pc.List(ctx, &corev1.PodList{}, client.InNamespace(adopted)))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(pc.Delete(ctx, cm))).To(BeTrue(), "deleting is the pruner's")

	// A child deleted out of band comes back.
	binding := &rbacv1.RoleBinding{}
	get(g, types.NamespacedName{Namespace: adopted, Name: "katastroma-provisioner"}, binding)
	g.Expect(env.Client.Delete(ctx, binding)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fresh := &rbacv1.RoleBinding{}
		get(g, client.ObjectKeyFromObject(binding), fresh)
		g.Expect(fresh.UID).NotTo(Equal(binding.UID))
	}).Should(Succeed())

	// A namespace removed from the spec is deleted; the webhook Secret of the other one is never rewritten.
	got := &gitopsv1alpha1.Tenant{}
	g.Eventually(func(g Gomega) { // the controller's status patches move the resourceVersion
		get(g, types.NamespacedName{Name: name}, got)
		got.Spec.Namespaces = []string{adopted}
		g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		readyTenant(g, name)
		err := env.Client.Get(ctx, types.NamespacedName{Name: name + "-prod"}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the namespace controller removed the created namespace")
	}).WithTimeout(time.Minute).Should(Succeed())
	s := &corev1.Secret{}
	get(g, types.NamespacedName{Namespace: adopted, Name: gitopsv1alpha1.WebhookSecretName}, s)
	g.Expect(s.Data[gitopsv1alpha1.WebhookSecretKey]).To(Equal(secret))

	// Offboarding: deleting the Tenant releases the namespace it adopted (it existed before the Tenant) without
	// deleting it or what it holds, then the Tenant goes.
	existing := &corev1.Namespace{}
	get(g, types.NamespacedName{Name: adopted}, existing)
	g.Expect(existing.OwnerReferences).To(BeEmpty(), "an adopted namespace gets no owner reference")
	g.Expect(existing.Annotations).NotTo(HaveKey(gitops.AnnotationCreatedBy))
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: name}, &gitopsv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	ns := &corev1.Namespace{}
	get(g, types.NamespacedName{Name: adopted}, ns)
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(ns.Labels).NotTo(HaveKey(gitopsv1alpha1.LabelTenant))
	get(g, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: adopted, Name: gitopsv1alpha1.ProvisionerServiceAccount}, &corev1.ServiceAccount{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Tenant's identities leave with it")
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: adopted, Name: "katastroma-pruner"}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

func TestTenantAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	installNamespaceGuard(t)
	a := "team-" + suffix()
	g.Expect(env.Client.Create(ctx, newTenant(a, a))).To(Succeed())
	g.Eventually(func(g Gomega) { readyTenant(g, a) }).Should(Succeed())

	// Another tenant cannot claim a's namespace, whether the claim names it in a create or an update.
	b := "team-" + suffix()
	err := env.Client.Create(ctx, newTenant(b, b, a))
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("spec.namespaces[1]: Forbidden: namespace %s belongs to tenant %s", a, a))))
	g.Expect(env.Client.Create(ctx, newTenant(b, b))).To(Succeed())
	g.Eventually(func(g Gomega) {
		tb := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: b}, tb)
		tb.Spec.Namespaces = append(tb.Spec.Namespaces, a)
		g.Expect(env.Client.Update(ctx, tb)).To(MatchError(ContainSubstring("spec.namespaces[1]: Forbidden")))
	}).Should(Succeed())
	// A namespace someone labelled for a by hand is a's too.
	claimed := a + "-by-label"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: claimed,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: a}}})).To(Succeed())
	err = env.Client.Create(ctx, newTenant("team-"+suffix(), claimed))
	g.Expect(err).To(MatchError(ContainSubstring("belongs to tenant " + a)))

	// Spec validation names the field.
	bad := newTenant("team-"+suffix(), "ok-"+suffix())
	bad.Spec.Resources = []gitopsv1alpha1.TenantResource{{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}}}
	g.Expect(env.Client.Create(ctx, bad)).To(MatchError(ContainSubstring("spec.resources[0].resources[0]: Forbidden")))

	// The tenant label of a namespace is immutable: neither changed nor removed.
	ns := &corev1.Namespace{}
	get(g, types.NamespacedName{Name: a}, ns)
	changed := ns.DeepCopy()
	changed.Labels[gitopsv1alpha1.LabelTenant] = b
	// The API server picks the new configuration up asynchronously: dry runs until the guard answers.
	g.Eventually(func() error { return env.Client.Update(ctx, changed.DeepCopy(), client.DryRunAll) }).
		Should(MatchError(ContainSubstring("metadata.labels[katastroma.org/tenant]: Forbidden: is immutable: it cannot change from " + a + " to " + b)))
	g.Expect(env.Client.Update(ctx, changed)).To(MatchError(ContainSubstring("is immutable")))
	removed := ns.DeepCopy()
	delete(removed.Labels, gitopsv1alpha1.LabelTenant)
	g.Expect(env.Client.Update(ctx, removed)).To(MatchError(ContainSubstring("it cannot be removed")))
	// Other label changes pass.
	other := ns.DeepCopy()
	other.Labels["team"] = "blue"
	g.Expect(env.Client.Update(ctx, other)).To(Succeed())

	// With the guard in place the controller can still release an adopted namespace it no longer lists.
	pre := "pre-" + suffix()
	c := "team-" + suffix()
	// An administrator hands the existing namespace over by labelling it.
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pre,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: c}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, newTenant(c, c, pre))).To(Succeed())
	g.Eventually(func(g Gomega) { readyTenant(g, c) }).Should(Succeed())
	g.Eventually(func(g Gomega) {
		tc := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: c}, tc)
		tc.Spec.Namespaces = []string{c}
		g.Expect(env.Client.Update(ctx, tc)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		released := &corev1.Namespace{}
		get(g, types.NamespacedName{Name: pre}, released)
		g.Expect(released.Labels).NotTo(HaveKey(gitopsv1alpha1.LabelTenant))
		g.Expect(released.DeletionTimestamp).To(BeNil())
	}).Should(Succeed())
}

// TestTenantMigratesToShippedRoles: a Tenant whose resources the shipped roles grant moves from the Role an earlier
// version wrote to the shipped ClusterRole (the Role is deleted); a Tenant asking for a kind they do not grant
// reports Ready=False RoleMissing naming the ClusterRole an administrator must create, and becomes Ready once an
// administrator creates it, the pipeline identity then holding the right through aggregation.
func TestTenantMigratesToShippedRoles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(testenv.ApplyShippedClusterRoles(ctx, env.Client)).To(Succeed())

	// What an earlier version left in a tenant namespace: a Role of the Tenant's rules and its binding.
	name := "mig-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: name}}})).To(Succeed())
	oldRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "katastroma-provisioner"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}}
	g.Expect(env.Client.Create(ctx, oldRole)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "katastroma-provisioner"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: oldRole.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "provisioner", Namespace: name}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, newTenant(name, name))).To(Succeed())
	g.Eventually(func(g Gomega) {
		readyTenant(g, name)
		rb := &rbacv1.RoleBinding{}
		get(g, types.NamespacedName{Namespace: name, Name: "katastroma-provisioner"}, rb)
		g.Expect(rb.RoleRef.Name).To(Equal(platform.TenantProvisionerClusterRole))
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(oldRole), &rbacv1.Role{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old Role is deleted")
	}).Should(Succeed())

	// Custom rules: a kind the shipped roles do not grant.
	custom := "custom-" + suffix()
	tn := newTenant(custom, custom)
	tn.Spec.Resources = []gitopsv1alpha1.TenantResource{{APIGroups: []string{""}, Resources: []string{"configmaps"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}}}
	g.Expect(env.Client.Create(ctx, tn)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: custom}, got)
		c := meta.FindStatusCondition(got.Status.Conditions, gitopsv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(gitopsv1alpha1.ReasonRoleMissing))
		g.Expect(c.Message).To(ContainSubstring("networkpolicies.networking.k8s.io"))
		g.Expect(c.Message).To(ContainSubstring(platform.AggregateToTenantProvisioner))
		g.Expect(c.Message).To(ContainSubstring(platform.AggregateToTenantPruner))
		g.Expect(c.Message).NotTo(ContainSubstring("configmaps"), "granted by the defaults")
	}).Should(Succeed())

	// The administrator grants the kind, as docs/gitops.md shows.
	for label, verbs := range map[string][]string{platform.AggregateToTenantProvisioner: {"get", "list", "create", "patch", "update"},
		platform.AggregateToTenantPruner: {"get", "list", "delete"}} {
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: custom + "-" + verbs[len(verbs)-1], Labels: map[string]string{label: "true"}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: verbs}}}
		g.Expect(env.Client.Create(ctx, cr)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, cr) })
	}
	g.Eventually(func(g Gomega) { readyTenant(g, custom) }).Should(Succeed())
	prov := rest.CopyConfig(env.Config)
	prov.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + custom + ":provisioner"}
	pc, err := client.New(prov, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { // the controller-manager aggregates the new rules into the shipped role
		return pc.List(ctx, &networkingv1.NetworkPolicyList{}, client.InNamespace(custom))
	}).Should(Succeed())
}
