package fleet_test

import (
	"context"
	"testing"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// as is a client that the API server sees as user with groups (impersonated by the administrator).
func as(t *testing.T, user string, groups ...string) client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

// allowFleet lets user write every fleet kind in ns (RBAC), so only admission decides.
func allowFleet(t *testing.T, ns, user string) {
	g := NewWithT(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-editor"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{fleetv1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
}

func labelNamespace(t *testing.T, ns string, labels map[string]string) {
	g := NewWithT(t)
	n := &corev1.Namespace{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n)).To(Succeed())
	n.Labels = labels
	g.Expect(env.Client.Update(context.Background(), n)).To(Succeed())
}

func TestTenantPolicyIsEnforcedForEveryKind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenantNS, otherNS := newNamespace(t), newNamespace(t)
	labelNamespace(t, tenantNS, map[string]string{"fleet-tenant": tenantNS})
	for _, ns := range []string{tenantNS, otherNS} {
		allowFleet(t, ns, "alice")
		allowFleet(t, ns, "bob")
	}
	policy := &fleetv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: tenantNS},
		Spec: fleetv1alpha1.TenantPolicySpec{
			Subjects:          []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "team-" + tenantNS}},
			RequiredMatchers:  []string{`team="a"`},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet-tenant": tenantNS}},
		}}
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, policy) })
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.TenantPolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(policy), got)).To(Succeed())
		g.Expect(got.Status.BoundSubjectCount).To(BeEquivalentTo(1))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionValid)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())

	alice := as(t, "alice", "team-"+tenantNS, "system:authenticated")
	bob := as(t, "bob", "system:authenticated")
	objects := func(ns, suffix string, matchers []string, ids []string, attrs map[string]string) []client.Object {
		sel := fleetv1alpha1.PolicySelector{Matchers: matchers, CollectorIDs: ids}
		return []client.Object{
			newPipeline(ns, "p"+suffix, func(p *fleetv1alpha1.Pipeline) { p.Spec.Matchers, p.Spec.Paused = matchers, true }),
			&fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rap" + suffix},
				Spec: fleetv1alpha1.RemoteAttributePolicySpec{Selector: sel, Attributes: map[string]string{"tier": "1"}}},
			&fleetv1alpha1.ExternalAttributeSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eas" + suffix},
				Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
					Source:   fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindHTTP, HTTP: &fleetv1alpha1.HTTPSource{URL: "https://cmdb.example.com/x"}},
					Schedule: "1h", Selector: sel,
					Mapping: fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: map[string]string{"rack": "rack"}}}},
			&fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cd" + suffix},
				Spec: fleetv1alpha1.CollectorDiscoverySpec{Selector: sel}},
			&fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col" + suffix},
				Spec: fleetv1alpha1.CollectorSpec{ID: ns + "-col" + suffix, RemoteAttributes: attrs}},
		}
	}

	// Inside the policy's namespaces alice must confine every object.
	for _, o := range objects(tenantNS, "-bad", []string{`env="prod"`}, nil, map[string]string{"team": "b"}) {
		err := alice.Create(ctx, o)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%T: %v", o, err)
		if _, ok := o.(*fleetv1alpha1.Collector); ok {
			g.Expect(err).To(MatchError(ContainSubstring("spec.remoteAttributes")))
		} else {
			g.Expect(err).To(MatchError(ContainSubstring(`team="a"`)))
		}
	}
	for _, o := range objects(tenantNS, "-ids", []string{`team="a"`}, []string{"edge-1"}, nil) {
		if _, ok := o.(*fleetv1alpha1.RemoteAttributePolicy); ok {
			g.Expect(alice.Create(ctx, o)).To(MatchError(ContainSubstring("spec.selector.collectorIDs")))
		}
	}
	// Spelling of the required matcher does not matter; the other matchers are free. (The collector is registered
	// and already team a's: an unregistered ID is claimable only through a collector.id matcher.)
	srv.PutCollector(&collectorv1.Collector{Id: tenantNS + "-col-ok", LocalAttributes: map[string]string{"team": "a"},
		CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY})
	for _, o := range objects(tenantNS, "-ok", []string{`team = a`, `env=~"prod|dev"`}, nil, map[string]string{"team": "a"}) {
		g.Expect(alice.Create(ctx, o)).To(Succeed(), "%T", o)
	}
	// A PipelineDiscovery would import every tenant's pipelines.
	g.Expect(alice.Create(ctx, &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "pd"}})).
		To(MatchError(ContainSubstring("may not create PipelineDiscoveries")))
	// Updates are checked too.
	p := &fleetv1alpha1.Pipeline{}
	g.Expect(alice.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "p-ok"}, p)).To(Succeed())
	p.Spec.Matchers = []string{`env="prod"`}
	g.Expect(apierrors.IsForbidden(alice.Update(ctx, p))).To(BeTrue())

	// Outside the selected namespaces, and for users no policy binds, nothing is required.
	for _, o := range objects(otherNS, "-free", []string{`env="prod"`}, []string{"edge-1"}, nil) {
		g.Expect(alice.Create(ctx, o)).To(Succeed(), "%T", o)
	}
	for _, o := range objects(tenantNS, "-bob", []string{`env="prod"`}, []string{"edge-1"}, nil) {
		g.Expect(bob.Create(ctx, o)).To(Succeed(), "%T", o)
	}
	g.Expect(bob.Create(ctx, &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "pd-bob"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}})).To(Succeed())
}

func TestCrossNamespaceDiscoveryNeedsCreateRightsInTheTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	home, target := newNamespace(t), newNamespace(t)
	allowFleet(t, home, "carol")
	carol := as(t, "carol", "system:authenticated")
	cd := func(name string) *fleetv1alpha1.CollectorDiscovery {
		return &fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: name},
			Spec: fleetv1alpha1.CollectorDiscoverySpec{TargetNamespace: target,
				Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`suite="` + home + `"`}}}}
	}
	err := carol.Create(ctx, cd("denied"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`may not create collectors.fleetmanagement.grafana.com in namespace "` + target + `"`)))
	g.Expect(carol.Create(ctx, &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "pd"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{TargetNamespace: target, Selector: otelSelector()}})).
		To(MatchError(ContainSubstring("may not create pipelines")))
	// The same discovery into its own namespace needs nothing more.
	own := cd("own")
	own.Spec.TargetNamespace = ""
	g.Expect(carol.Create(ctx, own)).To(Succeed())

	allowFleet(t, target, "carol")
	g.Eventually(func() error { return carol.Create(ctx, cd("allowed")) }).Should(Succeed())
}
