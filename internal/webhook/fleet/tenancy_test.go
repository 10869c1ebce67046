package fleet

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func asUser(name string, groups ...string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo: authenticationv1.UserInfo{Username: name, Groups: groups}}})
}

func tenancyFixture(allowSAR bool, objs ...client.Object) *Tenancy {
	policy := &fleetv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: fleetv1alpha1.TenantPolicySpec{
		Subjects:          []rbacv1.Subject{{Kind: "Group", Name: "team-a"}},
		RequiredMatchers:  []string{`team="a"`},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}}}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(append(objs, policy)...).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				sar.Status.Allowed = allowSAR && sar.Spec.User == "alice" && sar.Spec.ResourceAttributes.Verb == "create"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	return &Tenancy{Policies: c, Namespaces: c, Reviews: c, EnforcePolicies: true, EnforceCrossNamespace: true}
}

func TestTenancyChecks(t *testing.T) {
	tenantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Labels: map[string]string{"tenant": "a"}}}
	g := NewWithT(t)
	ten := tenancyFixture(true, tenantNS)
	path := fleetv1alpha1.GroupVersion.WithResource("pipelines").Resource
	alice := asUser("alice", "team-a")
	specPath := field.NewPath("spec")

	g.Expect(ten.CheckSelector(alice, path, "ns-a", "p", specPath, []string{`team="a"`}, nil)).To(Succeed())
	err := ten.CheckSelector(alice, path, "ns-a", "p", specPath, []string{`env="prod"`}, nil)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`team="a"`)))
	// A namespace the selector can't be evaluated against refuses (fail closed).
	err = ten.CheckSelector(alice, path, "missing", "p", specPath, []string{`env="prod"`}, nil)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("could not decide")))
	// Unbound users and switched-off enforcement check nothing; a nil Tenancy neither.
	g.Expect(ten.CheckSelector(asUser("bob"), path, "ns-a", "p", specPath, nil, []string{"x"})).To(Succeed())
	var none *Tenancy
	g.Expect(none.CheckSelector(alice, path, "ns-a", "p", specPath, nil, nil)).To(Succeed())
	g.Expect(none.CheckTarget(alice, "collectordiscoveries", "ns-a", "d", "other", "collectors")).To(Succeed())
	off := *ten
	off.EnforcePolicies = false
	g.Expect(off.CheckSelector(alice, path, "ns-a", "p", specPath, nil, nil)).To(Succeed())

	g.Expect(ten.CheckPipelineDiscovery(alice, &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "d"}})).
		To(MatchError(ContainSubstring("may not create PipelineDiscoveries")))
	g.Expect(ten.CheckCollector(alice, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "c"},
		Spec: fleetv1alpha1.CollectorSpec{ID: "x", RemoteAttributes: map[string]string{"team": "b"}}})).To(MatchError(ContainSubstring("spec.remoteAttributes")))

	// Cross-namespace: the review decides; the own namespace needs none.
	g.Expect(ten.CheckTarget(alice, "collectordiscoveries", "ns-a", "d", "other", "collectors")).To(Succeed())
	err = ten.CheckTarget(asUser("bob"), "collectordiscoveries", "ns-a", "d", "other", "collectors")
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring(`user "bob" may not create collectors.fleetmanagement.grafana.com in namespace "other"`)))
	g.Expect(ten.CheckTarget(asUser("bob"), "collectordiscoveries", "ns-a", "d", "ns-a", "collectors")).To(Succeed())
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	return s
}
