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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gitops"
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
	adopted := name + "-existing"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adopted}})).To(Succeed())
	tn := newTenant(name, name+"-prod", adopted)
	g.Expect(env.Client.Create(ctx, tn)).To(Succeed())

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
			for sa, verbs := range map[string][]string{"provisioner": {"get", "list", "create", "patch", "update"}, "pruner": {"get", "list", "delete"}} {
				get(g, types.NamespacedName{Namespace: nsName, Name: sa}, &corev1.ServiceAccount{})
				role := &rbacv1.Role{}
				get(g, types.NamespacedName{Namespace: nsName, Name: "katastroma-" + sa}, role)
				for _, r := range role.Rules {
					g.Expect(r.Verbs).To(Equal(verbs))
				}
				rb := &rbacv1.RoleBinding{}
				get(g, types.NamespacedName{Namespace: nsName, Name: "katastroma-" + sa}, rb)
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
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: adopted, Name: "katastroma-provisioner"}}
	g.Expect(env.Client.Delete(ctx, role)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fresh := &rbacv1.Role{}
		get(g, client.ObjectKeyFromObject(role), fresh)
		g.Expect(fresh.UID).NotTo(Equal(role.UID))
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
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pre}})).To(Succeed())
	c := "team-" + suffix()
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
