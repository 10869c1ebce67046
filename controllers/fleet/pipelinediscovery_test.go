package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
)

const otelContents = "receivers: {otlp: {}}\nservice: {pipelines: {}}\n"

// putOTel stores an OpenTelemetry pipeline in Fleet outside the operator and removes it when the test ends. The
// discoveries of these tests select only OpenTelemetry pipelines, which no other test of the package stores.
func putOTel(t *testing.T, name string, mutate func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
	p := &pipelinev1.Pipeline{Name: name, Contents: otelContents, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL}
	if mutate != nil {
		mutate(p)
	}
	stored := srv.PutPipeline(p)
	t.Cleanup(func() { srv.RemovePipeline(stored.GetId()) })
	return stored
}

func otelSelector() fleetv1alpha1.PipelineDiscoverySelector {
	ct := fleetv1alpha1.ConfigTypeOTel
	return fleetv1alpha1.PipelineDiscoverySelector{ConfigType: &ct}
}

func pipelineDiscovery(g Gomega, key client.ObjectKey) *fleetv1alpha1.PipelineDiscovery {
	d := &fleetv1alpha1.PipelineDiscovery{}
	g.Expect(env.Client.Get(context.Background(), key, d)).To(Succeed())
	return d
}

func TestPipelineDiscoveryAdoptsReportsConflictsAndRetires(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	a := putOTel(t, ns+"-a", func(p *pipelinev1.Pipeline) {
		p.Matchers = []string{`env="prod"`}
		p.Source = &pipelinev1.PipelineSource{Type: pipelinev1.PipelineSource_SOURCE_TYPE_GIT, Namespace: "repo"}
	})
	traces := putOTel(t, ns+".Traces", nil)
	bad := putOTel(t, ns+" with spaces", nil)
	taken := putOTel(t, ns+"-taken", nil)
	srv.PutPipeline(&pipelinev1.Pipeline{Name: ns + "-alloy", Contents: "x {}"}) // not selected
	t.Cleanup(func() { srv.RemovePipeline(srv.PipelineByName(ns + "-alloy").GetId()) })
	// A Pipeline of the namespace already holds the name derived for "-taken"; paused, so it makes no Fleet call.
	g.Expect(env.Client.Create(ctx, newPipeline(ns, discovery.PipelineCRName(taken.GetName()), func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name, p.Spec.Paused = ns+"-unrelated", true
	}))).To(Succeed())

	srv.ResetCalls()
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "import"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector()}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	g.Expect(d.Spec.PollInterval.Duration).To(Equal(5*time.Minute), "defaulted by the CRD")
	g.Expect(d.Spec.ImportMode).To(Equal(fleetv1alpha1.DiscoveryAdopt))
	g.Expect(d.Spec.Policy.OnPipelineRemoved).To(Equal(fleetv1alpha1.RemovalKeep))

	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, client.ObjectKeyFromObject(d))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(got.Status.PipelinesObserved).To(BeEquivalentTo(4))
		g.Expect(got.Status.PipelinesManaged).To(BeEquivalentTo(2))
		g.Expect(got.Status.StalePipelines).To(BeEquivalentTo(0))
		g.Expect(got.Status.Conflicts).To(ConsistOf(
			HaveField("PipelineID", bad.GetId()), HaveField("PipelineID", taken.GetId())))
		for _, c := range got.Status.Conflicts {
			if c.PipelineID == bad.GetId() {
				g.Expect(c.Reason).To(Equal(fleetv1alpha1.ConflictNameSanitizationFailed))
			} else {
				g.Expect(c.Reason).To(Equal(fleetv1alpha1.ConflictNotOwnedByDiscovery))
			}
		}
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionTruncatedConflicts)).To(BeTrue())
		g.Expect(got.Status.LastSyncTime).NotTo(BeNil())
		g.Expect(got.Status.LastSuccessTime).NotTo(BeNil())
	}).Should(Succeed())

	// The adopted CR reproduces the Fleet pipeline and the Pipeline controller syncs it under the same ID.
	aKey := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(a.GetName())}
	g.Expect(aKey.Name).To(Equal(a.GetName()), "an already valid name is kept")
	g.Eventually(func(g Gomega) {
		p := synced(g, aKey)
		g.Expect(p.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeAdopt))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationFleetPipelineID, a.GetId()))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationPipelineDiscoveredBy, ns+"/import"))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationNameScope, fleetv1alpha1.NameScopeNone))
		g.Expect(p.Labels).To(HaveKeyWithValue(fleetv1alpha1.LabelPipelineDiscoveryName, "import"))
		g.Expect(p.Labels).To(HaveKeyWithValue(fleetv1alpha1.LabelPipelineDiscoveryNamespace, ns))
		g.Expect(p.Spec.Name).To(Equal(a.GetName()))
		g.Expect(p.Spec.Matchers).To(Equal([]string{`env="prod"`}))
		g.Expect(p.Spec.Source).To(Equal(&fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGit, Namespace: "repo"}))
		g.Expect(p.Status.ID).To(Equal(a.GetId()), "adopted, not duplicated")
	}).Should(Succeed())
	tracesKey := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(traces.GetName())}
	g.Expect(tracesKey.Name).To(MatchRegexp(`^` + ns + `-traces-[0-9a-f]{5}$`))
	g.Expect(env.Client.Get(ctx, tracesKey, &fleetv1alpha1.Pipeline{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, ns, "import")).To(ContainElements("Discovered", "Conflict", "Synced"))
	}).Should(Succeed())

	// Skip rule: one list per poll; the CRs' own status writes and events do not poll again.
	g.Expect(srv.CallsFrom("ListPipelines", "")).To(HaveLen(1), "the drift check's lists are not the discovery's")
	g.Consistently(func() int { return len(srv.CallsFrom("ListPipelines", "")) }, "2s").Should(Equal(1))

	// A pipeline deleted in Fleet: with Keep its CR is marked stale. A spec change polls at once.
	srv.RemovePipeline(a.GetId())
	update := func(mutate func(*fleetv1alpha1.PipelineDiscovery)) {
		g.Eventually(func(g Gomega) {
			cur := pipelineDiscovery(g, client.ObjectKeyFromObject(d))
			mutate(cur)
			g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
	}
	update(func(d *fleetv1alpha1.PipelineDiscovery) {
		d.Spec.PollInterval = &metav1.Duration{Duration: 2 * time.Minute}
	})
	g.Eventually(func(g Gomega) {
		p := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, aKey, p)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationPipelineDiscoveryStale, "true"))
		got := pipelineDiscovery(g, client.ObjectKeyFromObject(d))
		g.Expect(got.Status.StalePipelines).To(BeEquivalentTo(1))
		g.Expect(got.Status.PipelinesObserved).To(BeEquivalentTo(3))
	}).Should(Succeed())

	// With Delete the stale CR goes (its pipeline is gone from Fleet, so the finalizer's delete is a no-op).
	update(func(d *fleetv1alpha1.PipelineDiscovery) {
		d.Spec.Policy.OnPipelineRemoved = fleetv1alpha1.RemovalDelete
	})
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, aKey, &fleetv1alpha1.Pipeline{})) }).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, client.ObjectKeyFromObject(d))
		g.Expect(got.Status.PipelinesManaged).To(BeEquivalentTo(1))
		g.Expect(got.Status.StalePipelines).To(BeEquivalentTo(0))
		g.Expect(eventReasons(g, ns, "import")).To(ContainElement("Pruned"))
	}).Should(Succeed())

	// ReadOnly: the CRs become mirrors and follow changes made in Fleet.
	srv.PutPipeline(&pipelinev1.Pipeline{Name: traces.GetName(), Contents: otelContents + "# edited in Fleet\n",
		Enabled: proto.Bool(false), ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL})
	update(func(d *fleetv1alpha1.PipelineDiscovery) { d.Spec.ImportMode = fleetv1alpha1.DiscoveryReadOnly })
	g.Eventually(func(g Gomega) {
		p := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, tracesKey, p)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeReadOnly))
		g.Expect(p.Spec.Contents).To(HaveSuffix("# edited in Fleet\n"))
		g.Expect(*p.Spec.Enabled).To(BeFalse())
	}).Should(Succeed())

	// Deleting the discovery orphans its CRs.
	g.Expect(env.Client.Delete(ctx, d)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(d), &fleetv1alpha1.PipelineDiscovery{}))
	}).Should(BeTrue())
	g.Consistently(func() error { return env.Client.Get(ctx, tracesKey, &fleetv1alpha1.Pipeline{}) }, "1s").Should(Succeed())
}

func TestPipelineDiscoveryConflictsAreCappedAt100(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for i := range 101 {
		putOTel(t, fmt.Sprintf("%s-many-%03d", ns, i), nil)
	}
	// The first discovery imports all of them read-only (no Fleet writes); the second finds every name taken.
	first := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	// Gone before later tests count Fleet calls (a poll after a manager restart would be one).
	t.Cleanup(func() { _ = env.Client.Delete(ctx, first) })
	g.Eventually(func(g Gomega) {
		g.Expect(pipelineDiscovery(g, client.ObjectKeyFromObject(first)).Status.PipelinesManaged).To(BeEquivalentTo(101))
	}, "60s").Should(Succeed())
	second := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, second) })
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, client.ObjectKeyFromObject(second))
		g.Expect(got.Status.Conflicts).To(HaveLen(fleetv1alpha1.MaxDiscoveryConflicts))
		g.Expect(got.Status.Conflicts[0].Reason).To(Equal(fleetv1alpha1.ConflictOwnedByOtherDiscovery))
		g.Expect(got.Status.PipelinesManaged).To(BeEquivalentTo(0))
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionTruncatedConflicts)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(eventReasons(g, ns, "second")).To(ContainElement("TruncatedConflicts"))
	}, "60s").Should(Succeed())
}

func TestDiscoveryWebhookRejections(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for name, tc := range map[string]struct {
		obj  client.Object
		want string
	}{
		"poll interval": {&fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p1"},
			Spec: fleetv1alpha1.PipelineDiscoverySpec{PollInterval: &metav1.Duration{Duration: 30 * time.Second}}}, "spec.pollInterval"},
		"target namespace": {&fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p2"},
			Spec: fleetv1alpha1.PipelineDiscoverySpec{TargetNamespace: "Not_A_Namespace"}}, "spec.targetNamespace"},
		"collector matcher": {&fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
			Spec: fleetv1alpha1.CollectorDiscoverySpec{Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`env=="x"`}}}}, "spec.selector.matchers[0]"},
		"collector blank ID": {&fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c2"},
			Spec: fleetv1alpha1.CollectorDiscoverySpec{Selector: fleetv1alpha1.PolicySelector{CollectorIDs: []string{" "}}}}, "spec.selector.collectorIDs[0]"},
		"collector poll interval": {&fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c3"},
			Spec: fleetv1alpha1.CollectorDiscoverySpec{PollInterval: &metav1.Duration{Duration: time.Second}}}, "spec.pollInterval"},
	} {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(ctx, tc.obj)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
