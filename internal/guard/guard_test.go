package guard_test

import (
	"context"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/guard"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/escalation"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

// kubeSystemDefault makes sure kube-system/default exists (no controller-manager runs here to create it), so a
// token request for it is refused for what it is, not for a missing ServiceAccount.
func kubeSystemDefault(t *testing.T) {
	err := env.Client.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "default"}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// serviceAccount creates namespace ns with ServiceAccount sa and returns a client acting as it, with the groups
// the API server gives a ServiceAccount.
func serviceAccount(t *testing.T, ns, sa string) escalation.Operator {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
	op, err := escalation.AsServiceAccount(ctx, env.Config, env.Client, ns, sa)
	g.Expect(err).NotTo(HaveOccurred())
	return op
}

func bind(t *testing.T, ns, sa string, role rbacv1.RoleRef) {
	t.Helper()
	ctx := context.Background()
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	var obj client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + role.Name}, RoleRef: role, Subjects: subjects}
	if role.Kind == "Role" {
		obj = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name}, RoleRef: role, Subjects: subjects}
	}
	NewWithT(t).Expect(env.Client.Create(ctx, obj)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
}

func scratch(t *testing.T, labels map[string]string, annotations map[string]string) string {
	t.Helper()
	name := "scratch-" + rand.String(6)
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: labels, Annotations: annotations}})).To(Succeed())
	return name
}

// TestGuardRefusesWhatRBACWouldAllow gives a ServiceAccount cluster-admin and the guard: what RBAC alone would allow,
// the guard refuses, naming why, and what the controllers legitimately write still passes.
func TestGuardRefusesWhatRBACWouldAllow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "guard-" + rand.String(5)
	kubeSystemDefault(t)
	op := serviceAccount(t, ns, "manager")
	bind(t, ns, "manager", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"})
	g.Expect(guard.Install(ctx, env.Client, guard.Options{User: "system:serviceaccount:" + ns + ":manager"})).To(Succeed())
	t.Cleanup(func() { deleteGuard(t) })

	g.Eventually(func() error { return guard.Enforced(ctx, op, ns) }).Should(Succeed(), "the API server enforces the guard")
	team := scratch(t, nil, nil)
	tenantNS := scratch(t, map[string]string{gitopsv1alpha1.LabelTenant: "team"}, map[string]string{gitopsv1alpha1.AnnotationCreatedBy: "team"})
	var guarded []escalation.Attempt
	for _, a := range escalation.Attempts(ns, "manager", team) {
		switch {
		case strings.Contains(a.Name, "Role with *"), strings.Contains(a.Name, "delete ClusterRole"),
			strings.Contains(a.Name, "ClusterRoleBinding the operator did not create"), strings.Contains(a.Name, "impersonate"),
			strings.Contains(a.Name, "exec"), strings.Contains(a.Name, "escalation guard"):
			// RBAC's to refuse; cluster-admin holds them.
		default:
			guarded = append(guarded, a)
		}
	}
	escalation.Refused(t, op, guarded)

	err := op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "tok",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}, client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring("may not write ServiceAccount token Secrets")), "the refusal says why")

	// What the controllers write passes.
	dry := client.DryRunAll
	pod := func(d *appsv1.Deployment, sa string, automount *bool) *appsv1.Deployment {
		labels := map[string]string{"app": d.Name}
		d.Spec = appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: sa, AutomountServiceAccountToken: automount,
				Containers: []corev1.Container{{Name: "c", Image: "example.com/agent:1"}}}}}
		return d
	}
	g.Expect(op.Create(ctx, pod(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "agent"}}, "", ptr.To(false)), dry)).
		To(Succeed(), "an agent or collector under the default ServiceAccount without its token")
	g.Expect(op.Create(ctx, pod(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "stage"}}, "katastroma-source", ptr.To(true)), dry)).
		To(Succeed(), "a gitops stage under its own ServiceAccount")
	g.Expect(op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "tls"}, StringData: map[string]string{"k": "v"}}, dry)).
		To(Succeed(), "an ordinary Secret")
	provisioner := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: gitopsv1alpha1.ProvisionerServiceAccount, Namespace: tenantNS}
	tenantRole := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-operator-katastroma-tenant-provisioner"}
	g.Expect(op.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "katastroma-provisioner"},
		RoleRef: tenantRole, Subjects: []rbacv1.Subject{provisioner}}, dry)).To(Succeed(), "a tenant identity's binding in its namespace")
	err = op.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "katastroma-provisioner"},
		RoleRef: tenantRole, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "provisioner", Namespace: team}}}, dry)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the same binding outside a tenant namespace: %v", err)
	err = op.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "borrowed"},
		RoleRef: tenantRole, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "provisioner", Namespace: team}}}, dry)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "another namespace's provisioner bound in a tenant namespace: %v", err)
	g.Expect(op.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "katastroma-source"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-operator-katastroma-source-tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "katastroma-source", Namespace: team}}}, dry)).
		To(Succeed(), "a Platform's source stage bound in a tenant namespace")
	g.Expect(op.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quartet-operator-katastroma-source"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-operator-katastroma-source"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "katastroma-source", Namespace: team}}}, dry)).To(Succeed())
	g.Expect(op.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quartet-operator-katastroma-source"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-operator-katastroma-source"}}, dry)).
		To(Succeed(), "a shared binding whose last Platform left has no subjects")
	g.Expect(op.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new-" + rand.String(5),
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: "team", "pod-security.kubernetes.io/enforce": "restricted"}}}, dry)).
		To(Succeed(), "a namespace the operator creates for a tenant")
	g.Expect(op.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}, dry)).
		To(Succeed(), "a namespace the operator created")
	g.Expect(op.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"katastroma.org/tenant":null}}}`)), dry)).
		To(Succeed(), "releasing a namespace")
}

// TestInstallRefusesAForeignGuard: a policy of the guard's name that this version did not create is reported, not
// silently trusted (the operator cannot replace it).
func TestInstallRefusesAForeignGuard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	o := guard.Options{User: "system:serviceaccount:x:y"}
	g.Expect(guard.Install(ctx, env.Client, o)).To(Succeed())
	t.Cleanup(func() { deleteGuard(t) })
	g.Expect(guard.Install(ctx, env.Client, o)).To(Succeed(), "the same guard again: nothing to do")
	err := guard.Install(ctx, env.Client, guard.Options{User: "system:serviceaccount:x:z"})
	g.Expect(err).To(MatchError(ContainSubstring("an administrator deletes it")))
}

func deleteGuard(t *testing.T) {
	policy, binding := guard.Policy(guard.Options{})
	tenantPolicy, tenantBinding := guard.TenantPolicy()
	for _, obj := range []client.Object{binding, policy, tenantBinding, tenantPolicy} {
		NewWithT(t).Expect(client.IgnoreNotFound(env.Client.Delete(context.Background(), obj))).To(Succeed())
	}
}

// TestOperatorRulesRefuseEveryEscalation binds exactly the operator's generated rules to a ServiceAccount, lets it
// install its guard itself (as the manager does at start), and tries every escalation as it: each is refused,
// by RBAC or by the guard it cannot change.
func TestOperatorRulesRefuseEveryEscalation(t *testing.T) {
	ctx := context.Background()
	ns := "op-" + rand.String(5)
	kubeSystemDefault(t)
	op := serviceAccount(t, ns, "manager")
	roles, err := testenv.OperatorRoles()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(roles).To(HaveLen(6), "the common ClusterRole and Role and one ClusterRole per group")
	for _, obj := range roles {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-" + obj.GetName()}
		obj.SetName(ref.Name)
		if _, namespaced := obj.(*rbacv1.Role); namespaced {
			obj.SetNamespace(ns)
			ref.Kind = "Role"
		}
		NewWithT(t).Expect(env.Client.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
		bind(t, ns, "manager", ref)
	}
	user, err := guard.Whoami(ctx, op)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	if err := guard.Install(ctx, op, guard.Options{User: user}); err != nil {
		t.Errorf("the operator installs its guard with its own rights: %v", err)
	}
	t.Cleanup(func() { deleteGuard(t) })
	NewWithT(t).Eventually(func() error { return guard.Enforced(ctx, op, ns) }).Should(Succeed(), "the API server enforces the guard")
	escalation.Refused(t, op, escalation.Attempts(ns, "manager", scratch(t, nil, nil)))
}

// TestGuardConfinesStagesToPlatformNamespaces: with --gitops-platform-namespaces, stage ServiceAccounts run and are
// bound cluster-wide only in those namespaces.
func TestGuardConfinesStagesToPlatformNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "guard-" + rand.String(5)
	op := serviceAccount(t, ns, "manager")
	bind(t, ns, "manager", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"})
	platformNS, team := scratch(t, nil, nil), scratch(t, nil, nil)
	g.Expect(guard.Install(ctx, env.Client, guard.Options{User: "system:serviceaccount:" + ns + ":manager",
		PlatformNamespaces: []string{platformNS}})).To(Succeed())
	t.Cleanup(func() { deleteGuard(t) })
	g.Eventually(func() error { return guard.Enforced(ctx, op, ns) }).Should(Succeed())

	stage := func(ns string) *appsv1.Deployment {
		labels := map[string]string{"app": "stage"}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "katastroma-source"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					ServiceAccountName: "katastroma-source", Containers: []corev1.Container{{Name: "c", Image: "example.com/k:1"}}}}}}
	}
	g.Expect(op.Create(ctx, stage(platformNS), client.DryRunAll)).To(Succeed())
	g.Expect(apierrors.IsForbidden(op.Create(ctx, stage(team), client.DryRunAll))).To(BeTrue(), "a stage outside the Platform namespaces")
	crb := func(ns string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quartet-operator-katastroma-source"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-operator-katastroma-source"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "katastroma-source", Namespace: ns}}}
	}
	g.Expect(op.Create(ctx, crb(platformNS), client.DryRunAll)).To(Succeed())
	g.Expect(apierrors.IsForbidden(op.Create(ctx, crb(team), client.DryRunAll))).To(BeTrue(), "a stage subject outside the Platform namespaces")
}

// TestTenantIdentitiesCannotReachOutsideTheirNamespaces: the tenant pipeline identities (provisioner, pruner) may
// not write Namespace objects, nor Services that reach outside the cluster network (externalIPs, CVE-2020-8554;
// NodePort and LoadBalancer unless an administrator allowed the type on the namespace) — even with every RBAC
// right.
func TestTenantIdentitiesCannotReachOutsideTheirNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenantNS := "tenant-" + rand.String(5)
	prov := serviceAccount(t, tenantNS, gitopsv1alpha1.ProvisionerServiceAccount)
	bind(t, tenantNS, gitopsv1alpha1.ProvisionerServiceAccount, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"})
	g.Expect(guard.Install(ctx, env.Client, guard.Options{User: "system:serviceaccount:x:manager"})).To(Succeed())
	t.Cleanup(func() { deleteGuard(t) })
	dry := client.DryRunAll
	svc := func(ns string, mutate func(*corev1.ServiceSpec)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "svc-"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "x"}}}
		if mutate != nil {
			mutate(&s.Spec)
		}
		return s
	}
	g.Eventually(func() error {
		return prov.Create(ctx, svc(tenantNS, func(s *corev1.ServiceSpec) { s.ExternalIPs = []string{"10.0.0.1"} }), dry)
	}).Should(MatchError(ContainSubstring("externalIPs")), "the API server enforces the tenant guard")
	g.Expect(prov.Create(ctx, svc(tenantNS, nil), dry)).To(Succeed(), "a ClusterIP Service")
	nodePort := func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeNodePort }
	g.Expect(prov.Create(ctx, svc(tenantNS, nodePort), dry)).To(MatchError(ContainSubstring("NodePort")))
	g.Expect(prov.Create(ctx, svc(tenantNS, func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeLoadBalancer }), dry)).
		To(MatchError(ContainSubstring("LoadBalancer")))
	allowed := scratch(t, nil, map[string]string{gitopsv1alpha1.AnnotationAllowServiceTypes: "NodePort"})
	g.Expect(prov.Create(ctx, svc(allowed, nodePort), dry)).To(Succeed(), "an administrator allowed NodePort there")

	err := prov.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new-" + rand.String(5)}}, dry)
	g.Expect(err).To(MatchError(ContainSubstring("may not write Namespace objects")))
	err = prov.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`)), dry)
	g.Expect(err).To(MatchError(ContainSubstring("may not write Namespace objects")))
}

// TestGuardLetsTheOperatorSetButNotChangePodSecurity: the operator may give a namespace that has none an enforce
// label of restricted or baseline, never privileged, and never change or remove one; it may not mark a namespace
// granted to a tenant (that is the administrator's proof).
func TestGuardLetsTheOperatorSetButNotChangePodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "guard-" + rand.String(5)
	op := serviceAccount(t, ns, "manager")
	bind(t, ns, "manager", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"})
	g.Expect(guard.Install(ctx, env.Client, guard.Options{User: "system:serviceaccount:" + ns + ":manager"})).To(Succeed())
	t.Cleanup(func() { deleteGuard(t) })
	g.Eventually(func() error { return guard.Enforced(ctx, op, ns) }).Should(Succeed())
	dry := client.DryRunAll
	label := func(ns, body string) error {
		return op.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			client.RawPatch("application/merge-patch+json", []byte(body)), dry)
	}
	bare := scratch(t, map[string]string{gitopsv1alpha1.LabelTenant: "team"}, nil)
	g.Expect(label(bare, `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`)).To(Succeed())
	g.Expect(label(bare, `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}`)).To(Succeed())
	g.Expect(label(bare, `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`)).
		To(MatchError(ContainSubstring("Pod Security")))
	set := scratch(t, map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}, nil)
	g.Expect(label(set, `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`)).
		To(MatchError(ContainSubstring("Pod Security")), "an administrator's level is kept")
	g.Expect(label(set, `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":null}}}`)).
		To(MatchError(ContainSubstring("Pod Security")))
	g.Expect(label(bare, `{"metadata":{"annotations":{"katastroma.org/granted-to":"team"}}}`)).
		To(MatchError(ContainSubstring(gitopsv1alpha1.AnnotationGrantedTo)))
	err := op.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new-" + rand.String(5),
		Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: "team"}}}, dry)
	g.Expect(err).To(MatchError(ContainSubstring(gitopsv1alpha1.AnnotationGrantedTo)))
}
