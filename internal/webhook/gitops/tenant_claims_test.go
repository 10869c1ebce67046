package gitops

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// TestTenantValidatorRefusesNamespacesByIdentity: a Platform's namespace and one whose ServiceAccounts are bound
// cluster-wide are refused even when an administrator labelled them for the tenant; an ordinary labelled one
// passes; privileged Pod Security needs the operator's flag.
func TestTenantValidatorRefusesNamespacesByIdentity(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(gitopsv1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	g.Expect(rbacv1.AddToScheme(scheme)).To(Succeed())
	labelled := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gitopsv1alpha1.LabelTenant: "team"},
			Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: "team"}}}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		labelled("katastroma"), labelled("monitoring"), labelled("team-ok"),
		&gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: "katastroma", Name: "main"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "monitoring"}}},
	).Build()
	v := TenantValidator{Reader: reader, Reserved: []string{"quartet-system"}}
	tenant := func(ns ...string) *gitopsv1alpha1.Tenant {
		return &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: gitopsv1alpha1.TenantSpec{Namespaces: ns}}
	}
	ctx := context.Background()
	_, err := v.ValidateCreate(ctx, tenant("team-ok", "katastroma"))
	g.Expect(err).To(MatchError(ContainSubstring("spec.namespaces[1]: Forbidden: namespace katastroma holds the gitops Platform main")))
	_, err = v.ValidateCreate(ctx, tenant("monitoring"))
	g.Expect(err).To(MatchError(ContainSubstring("spec.namespaces[0]: Forbidden: namespace monitoring has ServiceAccounts with cluster-wide rights")))
	_, err = v.ValidateCreate(ctx, tenant("team-ok", "team-new"))
	g.Expect(err).NotTo(HaveOccurred())

	privileged := tenant("team-new")
	privileged.Spec.PodSecurity = "privileged"
	_, err = v.ValidateCreate(ctx, privileged)
	g.Expect(err).To(MatchError(ContainSubstring("spec.podSecurity: Forbidden")))
	v.AllowPrivileged = true
	_, err = v.ValidateCreate(ctx, privileged)
	g.Expect(err).NotTo(HaveOccurred())
}
