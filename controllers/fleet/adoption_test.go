package fleet_test

import (
	"context"
	"testing"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

func adopting(ns, name, fleetName string) *fleetv1alpha1.Pipeline {
	return newPipeline(ns, name, func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = fleetName
		p.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: fleetv1alpha1.ImportModeAdopt}
	})
}

// refusedWith waits for Ready=False with reason, its message containing each of parts, and an event of that reason.
func refusedWith(g Gomega, key client.ObjectKey, reason string, parts ...string) {
	g.Eventually(func(g Gomega) {
		got := readyOf(g, key)
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(reason))
		for _, part := range parts {
			g.Expect(ready.Message).To(ContainSubstring(part))
		}
		g.Expect(got.Status.ID).To(BeEmpty(), "no ID is recorded for a pipeline the CR does not own")
		g.Expect(eventReasons(g, key.Namespace, key.Name)).To(ContainElement(reason))
	}).Should(Succeed())
}

func TestGrafanaManagedPipelineSurvivesAdoptAndDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ui := srv.PutPipeline(&pipelinev1.Pipeline{Name: ns + "-ui", Contents: `ui { made = "in grafana" }`, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
		Source:     &pipelinev1.PipelineSource{Type: pipelines.SourceTypeGrafana, Namespace: "grafana-ui"}})

	p := adopting(ns, "ui", ns+"-ui")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed(), "the CR itself declares no Grafana source, so admission lets it through")
	key := client.ObjectKeyFromObject(p)
	refusedWith(g, key, fleetv1alpha1.ReasonGrafanaManaged, ui.GetId(), "never adopted")
	g.Consistently(func() []pipelineWrite { return writesTo(ui.GetId()) }, "1s").Should(BeEmpty())

	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(gone(key)).Should(BeTrue())
	g.Expect(deletes()).NotTo(ContainElement(ui.GetId()))
	g.Expect(srv.PipelineByName(ns + "-ui").GetContents()).To(Equal(ui.GetContents()))
}

func TestAdoptNeverTakesAPipelineMarkedByAnotherCR(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	other := pipelines.Marker{Cluster: "cluster-b", Namespace: "team-b", Name: "logs", UID: "3f1c"}
	theirs := srv.PutPipeline(&pipelinev1.Pipeline{Name: ns + "-shared", Contents: `b { owner = "cluster-b" }`, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY, Metadata: other.Struct()})

	p := adopting(ns, "shared", ns+"-shared")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	refusedWith(g, key, fleetv1alpha1.ReasonOwnedElsewhere, theirs.GetId(), "team-b/logs", "cluster-b")
	g.Consistently(func() []pipelineWrite { return writesTo(theirs.GetId()) }, "1s").Should(BeEmpty())
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(gone(key)).Should(BeTrue())
	g.Expect(srv.PipelineByName(ns + "-shared")).NotTo(BeNil())
}

func TestAdoptActsOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	first := outside(ns+"-once", `once { v = "terraform" }`)
	p := adopting(ns, "once", ns+"-once")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var adopted *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) {
		adopted = synced(g, key)
		g.Expect(adopted.Status.ID).To(Equal(first.GetId()))
	}).Should(Succeed())

	// Someone deletes it in the UI and a colleague makes a new pipeline of that name.
	srv.RemovePipeline(first.GetId())
	colleagues := outside(ns+"-once", `once { v = "colleague" }`)
	adopted.Spec.Contents = `once { v = "cr" }`
	g.Expect(env.Client.Update(ctx, adopted)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := readyOf(g, key)
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(got.Status.ObservedGeneration).To(Equal(adopted.Generation))
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonNameTaken))
		g.Expect(ready.Message).To(ContainSubstring("acts only once"))
	}).Should(Succeed())
	g.Expect(writesTo(colleagues.GetId())).To(BeEmpty())
	g.Expect(srv.PipelineByName(ns + "-once").GetContents()).To(Equal(colleagues.GetContents()))
	g.Expect(readyOf(g, key).Status.OwnershipEstablished).To(BeTrue())

	// The CR remains the source of its own pipeline: once the name is free it is created again from the CR.
	srv.RemovePipeline(colleagues.GetId())
	got := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	got.Spec.Contents = `once { v = "cr again" }`
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(synced(g, key).Status.ID).NotTo(BeEmpty())
		g.Expect(srv.PipelineByName(ns + "-once").GetContents()).To(Equal(got.Spec.Contents))
	}).Should(Succeed())
}

// teamANamespace is a namespace where user (in group team-a-<ns>) is bound by a TenantPolicy requiring team="a",
// with that policy already in the webhooks' cache.
func teamANamespace(t *testing.T, user string) (string, client.Client) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	labelNamespace(t, ns, map[string]string{"fleet-tenant": ns})
	allowFleet(t, ns, user)
	policy := &fleetv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: fleetv1alpha1.TenantPolicySpec{
			Subjects:          []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "team-a-" + ns}},
			RequiredMatchers:  []string{`team="a"`},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet-tenant": ns}},
		}}
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, policy) })
	// The webhook reads policies from the manager's cache, which the policy's status shows has seen it.
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.TenantPolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(policy), got)).To(Succeed())
		g.Expect(got.Status.BoundSubjectCount).To(BeEquivalentTo(1))
	}).Should(Succeed())
	return ns, as(t, user, "team-a-"+ns, "system:authenticated")
}

func TestTenantCannotAdoptAnotherTenantsPipeline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, dora := teamANamespace(t, "dora")

	teamB := srv.PutPipeline(&pipelinev1.Pipeline{Name: ns + "-team-b-logs", Contents: `b { v = 1 }`, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY, Matchers: []string{`team="b"`}})
	teamA := srv.PutPipeline(&pipelinev1.Pipeline{Name: ns + "-team-a-logs", Contents: `a { v = 1 }`, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY, Matchers: []string{`team="a"`, `env="prod"`}})
	take := func(name, fleetName string) *fleetv1alpha1.Pipeline {
		p := adopting(ns, name, fleetName)
		p.Spec.Matchers = []string{`team="a"`}
		return p
	}

	// The CR's own matchers are team A's; the pipeline it would take is team B's.
	err := dora.Create(ctx, take("steal", teamB.GetName()))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring(fleetv1alpha1.AnnotationImportMode)))
	g.Expect(err).To(MatchError(ContainSubstring(`team="b"`)))
	g.Consistently(func() []pipelineWrite { return writesTo(teamB.GetId()) }, "1s").Should(BeEmpty())

	// A pipeline inside the tenant's slice may be adopted, and so may a name no pipeline has yet.
	own := take("own", teamA.GetName())
	g.Expect(dora.Create(ctx, own)).To(Succeed())
	g.Expect(dora.Create(ctx, take("fresh", ns+"-team-a-new"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(synced(g, client.ObjectKeyFromObject(own)).Status.ID).To(Equal(teamA.GetId()))
	}).Should(Succeed())
	// An update that points an admitted CR at team B's pipeline is refused too.
	got := &fleetv1alpha1.Pipeline{}
	g.Expect(dora.Get(ctx, client.ObjectKeyFromObject(own), got)).To(Succeed())
	got.Spec.Name = teamB.GetName()
	g.Expect(apierrors.IsForbidden(dora.Update(ctx, got))).To(BeTrue())
}

func TestTenantCannotSetAnotherTenantsAttributeValue(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, erin := teamANamespace(t, "erin")
	mine := fleetv1alpha1.PolicySelector{Matchers: []string{`team="a"`}}
	rap := func(name string, attrs map[string]string) *fleetv1alpha1.RemoteAttributePolicy {
		return &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleetv1alpha1.RemoteAttributePolicySpec{Selector: mine, Attributes: attrs}}
	}
	eas := func(name string, fields map[string]string) *fleetv1alpha1.ExternalAttributeSync {
		return &fleetv1alpha1.ExternalAttributeSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
				Source:   fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindHTTP, HTTP: &fleetv1alpha1.HTTPSource{URL: "https://cmdb.example.com/x"}},
				Schedule: "1h", Selector: mine,
				Mapping: fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: fields}}}
	}

	// Its selector is team A's, but the value it sets would move the collectors into team B's slice.
	err := erin.Create(ctx, rap("move", map[string]string{"team": "b", "tier": "1"}))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("spec.attributes[team]")))
	// A sync's values arrive later from outside: the confining key is not a sync's to set.
	err = erin.Create(ctx, eas("move", map[string]string{"team": "owner_team", "rack": "rack"}))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("spec.mapping.attributeFields[team]")))

	// The tenant's own value, and keys no required matcher names, are free.
	g.Expect(erin.Create(ctx, rap("keep", map[string]string{"team": "a", "tier": "1"}))).To(Succeed())
	g.Expect(erin.Create(ctx, eas("racks", map[string]string{"rack": "rack"}))).To(Succeed())
	// A collector that has not registered yet cannot be claimed by giving it the tenant's attributes.
	err = erin.Create(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "future"},
		Spec: fleetv1alpha1.CollectorSpec{ID: ns + "-future", RemoteAttributes: map[string]string{"team": "a"}}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("has not registered")))
	// Updates are checked too.
	got := &fleetv1alpha1.RemoteAttributePolicy{}
	g.Expect(erin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep"}, got)).To(Succeed())
	got.Spec.Attributes["team"] = "b"
	g.Expect(apierrors.IsForbidden(erin.Update(ctx, got))).To(BeTrue())
	// A sync admitted without the confining key cannot be given it later either.
	sync := &fleetv1alpha1.ExternalAttributeSync{}
	g.Expect(erin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "racks"}, sync)).To(Succeed())
	sync.Spec.Mapping.AttributeFields["team"] = "owner_team"
	err = erin.Update(ctx, sync)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("spec.mapping.attributeFields[team]")))
}
