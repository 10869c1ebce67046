// Package escalation tries, as the operator's own identity, every way the operator's rights could be turned into
// cluster-admin (docs/install.md, "Permissions"), so test/olm (the CSV's rules), test/helm (the chart's) and the
// guard's own test (config/rbac's) prove each is refused. Every write is a server-side dry run: it passes through
// authentication, authorization and admission like a real one, yet a path left open on some version of the code
// cannot damage the shared control plane.
package escalation

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/guard"
)

// Operator is the operator's identity: its rest config (its own token) and a client built from it.
type Operator struct {
	Config *rest.Config
	client.Client
}

// UserAgent marks the attempts' requests, so an audit of the operator's own requests can leave them out.
const UserAgent = "quartet-escalation-attempts"

// AsServiceAccount is ServiceAccount ns/sa authenticated as itself: a bound token from a TokenRequest (made with
// admin), on admin's server and CA and nothing else of admin's credentials.
func AsServiceAccount(ctx context.Context, admin *rest.Config, c client.Client, ns, sa string) (Operator, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, tr); err != nil {
		return Operator{}, fmt.Errorf("requesting a token of %s/%s: %w", ns, sa, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.UserAgent = UserAgent
	as, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		return Operator{}, err
	}
	return Operator{Config: cfg, Client: as}, nil
}

// Attempt is one escalation, tried as the operator.
type Attempt struct {
	Name string
	Try  func(ctx context.Context, as Operator) error
}

// Attempts are the escalations of the operator's identity ns/sa to try: binding cluster-admin, writing roles,
// deleting cluster RBAC, minting tokens, borrowing a ServiceAccount in kube-system, impersonating, exec, and
// switching the escalation guard off. scratch is a namespace no Tenant owns, made by the caller.
func Attempts(ns, sa, scratch string) []Attempt {
	dry := client.DryRunAll
	me := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}
	clusterAdmin := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}
	name := "escalation-" + rand.String(5)
	return []Attempt{
		{"bind cluster-admin in kube-system", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
				RoleRef: clusterAdmin, Subjects: []rbacv1.Subject{me}}, dry)
		}},
		{"bind cluster-admin cluster-wide", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: clusterAdmin, Subjects: []rbacv1.Subject{me}}, dry)
		}},
		{"create a Role with * in a namespace no Tenant owns", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: scratch, Name: name},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, dry)
		}},
		{"delete ClusterRole cluster-admin", func(ctx context.Context, as Operator) error {
			return as.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"}}, dry)
		}},
		{"delete a ClusterRoleBinding the operator did not create", func(ctx context.Context, as Operator) error {
			return as.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"}}, dry)
		}},
		{"update a ClusterRoleBinding the operator did not create", func(ctx context.Context, as Operator) error {
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:basic-user"}}
			patch := []byte(fmt.Sprintf(`{"subjects":[{"kind":"ServiceAccount","name":%q,"namespace":%q}]}`, sa, ns))
			return as.Patch(ctx, crb, client.RawPatch("application/merge-patch+json", patch), dry)
		}},
		{"create a token Secret for kube-system/default", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
				Type: corev1.SecretTypeServiceAccountToken}, dry)
		}},
		{"create a token Secret for a ServiceAccount of a team namespace", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: scratch, Name: name,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
				Type: corev1.SecretTypeServiceAccountToken}, dry)
		}},
		{"create serviceaccounts/token for kube-system/default", func(ctx context.Context, as Operator) error {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "default"}}
			return as.SubResource("token").Create(ctx, sa, &authenticationv1.TokenRequest{}, client.DryRunAll)
		}},
		{"create a Deployment in kube-system under its default ServiceAccount", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, deployment("kube-system", name, "default", nil), dry)
		}},
		{"create a Deployment in a team namespace under a ServiceAccount the operator did not create", func(ctx context.Context, as Operator) error {
			return as.Create(ctx, deployment(scratch, name, "default", nil), dry)
		}},
		{"impersonate a user", func(ctx context.Context, as Operator) error {
			cfg := rest.CopyConfig(as.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "admin", Groups: []string{"system:masters"}}
			c, err := client.New(cfg, client.Options{Scheme: as.Scheme()})
			if err != nil {
				return err
			}
			return c.Create(ctx, &authenticationv1.SelfSubjectReview{})
		}},
		{"exec into a pod", func(ctx context.Context, as Operator) error {
			cs, err := kubernetes.NewForConfig(as.Config)
			if err != nil {
				return err
			}
			return cs.CoreV1().RESTClient().Post().Namespace("kube-system").Resource("pods").Name("any").
				SubResource("exec").Param("command", "sh").Param("stdout", "true").Do(ctx).Error()
		}},
		{"label a namespace for a tenant", func(ctx context.Context, as Operator) error {
			return as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scratch}},
				client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"katastroma.org/tenant":"x"}}}`)), dry)
		}},
		{"relax a namespace's Pod Security", func(ctx context.Context, as Operator) error {
			return as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scratch}},
				client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`)), dry)
		}},
		{"delete a namespace the operator did not create", func(ctx context.Context, as Operator) error {
			return as.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scratch}}, dry)
		}},
		{"delete the escalation guard", func(ctx context.Context, as Operator) error {
			policy, _ := guard.Policy(guard.Options{})
			return as.Delete(ctx, policy, dry)
		}},
		{"delete the escalation guard's binding", func(ctx context.Context, as Operator) error {
			_, binding := guard.Policy(guard.Options{})
			return as.Delete(ctx, binding, dry)
		}},
		{"rewrite the escalation guard", func(ctx context.Context, as Operator) error {
			policy, _ := guard.Policy(guard.Options{})
			return as.Patch(ctx, policy, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"validations":[{"expression":"true"}]}}`)), dry)
		}},
	}
}

func deployment(ns, name, sa string, automount *bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: sa, AutomountServiceAccountToken: automount,
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/escalate:1",
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			}}}}
}

// Refused runs every attempt as the operator and fails t for each that was not refused with 403 Forbidden.
func Refused(t *testing.T, as Operator, attempts []Attempt) {
	t.Helper()
	ctx := context.Background()
	for _, a := range attempts {
		if err := a.Try(ctx, as); !apierrors.IsForbidden(err) {
			t.Errorf("as the operator, %q must be refused with 403 Forbidden; got %v", a.Name, err)
		}
	}
}
