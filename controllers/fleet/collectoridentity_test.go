package fleet_test

import (
	"context"
	"testing"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestACollectorIDIsClaimedByOneCollectorClusterWide(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns1, ns2 := newNamespace(t), newNamespace(t)
	id := ns1 + "-shared-collector"
	srv.PutCollector(&collectorv1.Collector{Id: id, Name: "shared", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY})

	first := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns1, Name: "first"},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"team": "a"}}}
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := collectorReady(g, client.ObjectKeyFromObject(first))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionConflicted)).To(BeTrue())
	}).Should(Succeed())

	for _, ns := range []string{ns2, ns1} {
		second := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"},
			Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"team": "b"}}}
		err := env.Client.Create(ctx, second)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "namespace %s: want Invalid, got %v", ns, err)
		g.Expect(err.Error()).To(ContainSubstring("spec.id"))
		g.Expect(err.Error()).To(ContainSubstring("already claimed by Collector " + ns1 + "/first"))
	}
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("team", "a"))

	// Once the holder is gone the ID is free again.
	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		third := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns2, Name: "third"},
			Spec: fleetv1alpha1.CollectorSpec{ID: id}}
		g.Expect(env.Client.Create(ctx, third)).To(Succeed())
	}).Should(Succeed())
}

func TestATenantCannotPullAnotherTenantsCollectorIntoScope(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	labelNamespace(t, ns, map[string]string{"fleet-tenant": ns})
	allowFleet(t, ns, "carol")
	policy := &fleetv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: fleetv1alpha1.TenantPolicySpec{
			Subjects:          []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}},
			RequiredMatchers:  []string{`team="a"`},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet-tenant": ns}},
		}}
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, policy) })
	// Ready means the manager's cache, which admission reads, has the policy.
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.TenantPolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(policy), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())
	theirs, ours := ns+"-team-b-edge", ns+"-team-a-edge"
	srv.PutCollector(&collectorv1.Collector{Id: theirs, RemoteAttributes: map[string]string{"team": "b"}})
	srv.PutCollector(&collectorv1.Collector{Id: ours, LocalAttributes: map[string]string{"team": "a"}})
	carol := as(t, "carol", "system:authenticated")

	// Setting team=a on team b's collector would move it into carol's scope.
	steal := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steal"},
		Spec: fleetv1alpha1.CollectorSpec{ID: theirs, RemoteAttributes: map[string]string{"team": "a"}}}
	err := carol.Create(ctx, steal)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.id"))
	g.Expect(srv.Collector(theirs).GetRemoteAttributes()).To(HaveKeyWithValue("team", "b"))

	// Her own collector (team=a reported by the collector itself) is fine.
	mine := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Spec: fleetv1alpha1.CollectorSpec{ID: ours, RemoteAttributes: map[string]string{"team": "a", "rack": "r1"}}}
	g.Expect(carol.Create(ctx, mine)).To(Succeed())
}
