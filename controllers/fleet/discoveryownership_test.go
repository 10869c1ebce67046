package fleet_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

func TestDeletedPipelineIsNotBroughtBackByADiscoveredDuplicate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// A Pipeline of this cluster owns its Fleet pipeline (by marker).
	orig := newPipeline(ns, "orig", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name, p.Spec.Contents, p.Spec.ConfigType = ns+"-orig", otelContents, fleetv1alpha1.ConfigTypeOTel
	})
	g.Expect(env.Client.Create(ctx, orig)).To(Succeed())
	origKey := client.ObjectKeyFromObject(orig)
	var owner *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { owner = synced(g, origKey) }).Should(Succeed())
	t.Cleanup(func() { srv.RemovePipeline(owner.Status.ID) })
	// Another cluster sharing the stack owns this one.
	elsewhere := putOTel(t, ns+"-elsewhere", func(p *pipelinev1.Pipeline) {
		p.Metadata = pipelines.Marker{Cluster: "cluster-b", Namespace: "b", Name: "b", UID: "b-uid"}.Struct()
	})

	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "import"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector()}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	elsewhereKey := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(elsewhere.GetName())}
	elsewhereCR := &fleetv1alpha1.Pipeline{}
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, client.ObjectKeyFromObject(d))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(env.Client.Get(ctx, elsewhereKey, elsewhereCR)).To(Succeed(), "the poll is done")
	}).Should(Succeed())

	// The original CR is deleted: its finalizer deletes the pipeline, and nothing brings it back.
	g.Expect(env.Client.Delete(ctx, owner)).To(Succeed())
	g.Eventually(gone(origKey)).Should(BeTrue())
	g.Consistently(func() *pipelinev1.Pipeline { return srv.PipelineByName(ns + "-orig") }, "3s").Should(BeNil())
	// Because this cluster's marked pipeline was never imported.
	dupKey := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(ns + "-orig")}
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, dupKey, &fleetv1alpha1.Pipeline{}))).To(BeTrue(), "no duplicate CR")

	// Another cluster's pipeline is mirrored, never adopted.
	g.Expect(elsewhereCR.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeReadOnly))
	g.Expect(writesTo(elsewhere.GetId())).To(BeEmpty())
}

func TestDiscoveredPipelineNeverCreatesItsPipelineAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// A CR a discovery made (before this release, say) for a pipeline that has since been deleted.
	p := newPipeline(ns, "dup", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = ns + "-deleted"
		p.Annotations = map[string]string{
			fleetv1alpha1.AnnotationImportMode:           fleetv1alpha1.ImportModeAdopt,
			fleetv1alpha1.AnnotationPipelineDiscoveredBy: ns + "/import",
			fleetv1alpha1.AnnotationNameScope:            fleetv1alpha1.NameScopeNone,
		}
	})
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		ready := meta.FindStatusCondition(readyOf(g, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonPipelineGone))
	}).Should(Succeed())
	g.Expect(upserts(ns + "-deleted")).To(BeEmpty())
	g.Expect(srv.PipelineByName(ns + "-deleted")).To(BeNil())
}

func TestReadOnlyPipelineReportsItsDiscoveryGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mirrored := putOTel(t, ns+"-mirrored", nil)
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirror"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(mirrored.GetName())}
	g.Eventually(func(g Gomega) {
		got := synced(g, key)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady).Reason).To(Equal(fleetv1alpha1.ReasonReadOnly))
		g.Expect(got.Status.ID).To(Equal(mirrored.GetId()))
	}).Should(Succeed())

	// Nothing refreshes it any more: it says so instead of staying Ready=True with a frozen status.
	g.Expect(env.Client.Delete(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := meta.FindStatusCondition(readyOf(g, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonDiscoveryGone))
		g.Expect(ready.Message).To(ContainSubstring(ns + "/mirror"))
	}).Should(Succeed())
	g.Expect(writesTo(mirrored.GetId())).To(BeEmpty())

	// A discovery of that name coming back takes it over again.
	d = &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirror"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	g.Eventually(func(g Gomega) {
		g.Expect(meta.FindStatusCondition(synced(g, key).Status.Conditions, fleetv1alpha1.ConditionReady).Reason).To(Equal(fleetv1alpha1.ReasonReadOnly))
	}).Should(Succeed())
}

func TestRefusedDiscoveryCreateIsNotReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	lost := putOTel(t, ns+"-lost", nil)
	// The target namespace does not exist: the API server refuses every create.
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly,
			TargetNamespace: ns + "-missing"}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, client.ObjectKeyFromObject(d))
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonCRWriteFailed))
		g.Expect(got.Status.Conflicts).To(ContainElement(And(HaveField("PipelineID", lost.GetId()),
			HaveField("Reason", fleetv1alpha1.ConflictCreateFailed))))
		g.Expect(got.Status.LastSuccessTime).To(BeNil())
	}).Should(Succeed())
}

func TestDiscoveryWaitsTheServersRetryAfter(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	putOTel(t, ns+"-later", nil)
	// The next ordinary ListPipelines (this discovery's first poll) is answered 429 with Retry-After: 20.
	srv.InjectFault(fleetserver.Fault{Method: "ListPipelines", Code: connect.CodeResourceExhausted, RetryAfter: 20 * time.Second, Times: 1})
	t.Cleanup(srv.ClearFaults)
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patient"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	key := client.ObjectKeyFromObject(d)
	var limitedAt time.Time
	g.Eventually(func(g Gomega) {
		ready := meta.FindStatusCondition(pipelineDiscovery(g, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonRateLimited))
		limitedAt = time.Now()
	}).Should(Succeed())
	// Not the fixed 10 s retry: nothing before the server's 20 s have passed ...
	g.Consistently(func() string {
		return meta.FindStatusCondition(pipelineDiscovery(g, key).Status.Conditions, fleetv1alpha1.ConditionReady).Reason
	}, 15*time.Second, time.Second).Should(Equal(fleetv1alpha1.ReasonRateLimited))
	// ... then it polls again.
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(pipelineDiscovery(g, key).Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())
	t.Logf("polled again %s after the 429", time.Since(limitedAt).Round(time.Second))
}
