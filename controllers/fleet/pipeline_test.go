package fleet_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/fleet"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

func newPipeline(ns, name string, mutate func(*fleetv1alpha1.Pipeline)) *fleetv1alpha1.Pipeline {
	p := &fleetv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleetv1alpha1.PipelineSpec{Contents: `logging { level = "info" }`},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// pipelineWrite is one recorded write of a pipeline (CreatePipeline, UpdatePipeline or UpsertPipeline).
type pipelineWrite struct {
	Method   string
	At       time.Time
	Pipeline *pipelinev1.Pipeline
}

// allWrites are the recorded pipeline writes, oldest first.
func allWrites() []pipelineWrite {
	var out []pipelineWrite
	for _, c := range srv.Calls() {
		var p *pipelinev1.Pipeline
		switch r := c.Request.(type) {
		case *pipelinev1.CreatePipelineRequest:
			p = r.GetPipeline()
		case *pipelinev1.UpdatePipelineRequest:
			p = r.GetPipeline()
		case *pipelinev1.UpsertPipelineRequest:
			p = r.GetPipeline()
		default:
			continue
		}
		out = append(out, pipelineWrite{Method: c.Method, At: c.At, Pipeline: p})
	}
	return out
}

// upserts are the recorded writes for one Fleet name.
func upserts(name string) []pipelineWrite {
	var out []pipelineWrite
	for _, w := range allWrites() {
		if w.Pipeline.GetName() == name {
			out = append(out, w)
		}
	}
	return out
}

// deletes are the recorded DeletePipeline IDs.
func deletes() []string {
	var out []string
	for _, c := range srv.CallsTo("DeletePipeline") {
		out = append(out, c.Request.(*pipelinev1.DeletePipelineRequest).GetId())
	}
	return out
}

func synced(g Gomega, key client.ObjectKey) *fleetv1alpha1.Pipeline {
	p := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(context.Background(), key, p)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "conditions: %v", p.Status.Conditions)
	g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	return p
}

func TestPipelineLifecycleMakesExactlyTheExpectedCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	name := ns + "-logs"
	before := takeSnapshot(g)
	p := newPipeline(ns, "logs", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = name
		p.Spec.Matchers = []string{`env="prod"`, `team=~"a|b"`}
		p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGit, Namespace: "github.com/acme/pipelines"}
	})
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	g.Expect(p.Spec.ConfigType).To(Equal(fleetv1alpha1.ConfigTypeAlloy), "defaulted by the CRD")
	g.Expect(*p.Spec.Enabled).To(BeTrue(), "defaulted by the CRD")

	var first *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { first = synced(g, client.ObjectKeyFromObject(p)) }).Should(Succeed())
	g.Expect(first.Finalizers).To(ContainElement(fleetv1alpha1.PipelineFinalizer))
	g.Expect(first.Status.ID).NotTo(BeEmpty())
	g.Expect(first.Status.SyncedName).To(Equal(name))
	g.Expect(first.Status.Source).To(Equal("Git"))
	g.Expect(first.Status.CreatedAt).NotTo(BeNil())

	calls := upserts(name)
	g.Expect(calls).To(HaveLen(1))
	want := &pipelinev1.Pipeline{Name: name, Contents: p.Spec.Contents, Matchers: p.Spec.Matchers, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
		Source:     &pipelinev1.PipelineSource{Type: pipelinev1.PipelineSource_SOURCE_TYPE_GIT, Namespace: "github.com/acme/pipelines"}}
	g.Expect(calls[0].Method).To(Equal("CreatePipeline"), "a new Pipeline's first write is a create")
	marker, ok := pipelines.MarkerOf(calls[0].Pipeline)
	g.Expect(ok).To(BeTrue(), "the ownership marker is written: %v", calls[0].Pipeline.GetMetadata())
	g.Expect(marker).To(HaveField("Namespace", ns))
	g.Expect(marker).To(HaveField("Name", "logs"))
	g.Expect(marker).To(HaveField("UID", string(first.UID)))
	g.Expect(marker.Cluster).NotTo(BeEmpty())
	want.Metadata = calls[0].Pipeline.GetMetadata()
	g.Expect(proto.Equal(calls[0].Pipeline, want)).To(BeTrue(), "every field is sent: %v", calls[0].Pipeline)
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns, "logs")).To(ContainElement("Created")) }).Should(Succeed())

	// Status writes and finalizer updates do not cause more calls.
	g.Consistently(func() int { return len(upserts(name)) }, "1s").Should(Equal(1))

	// An update sends the whole object again, keeping the ID.
	first.Spec.Enabled = proto.Bool(false)
	first.Spec.Matchers = nil
	g.Expect(env.Client.Update(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		second := synced(g, client.ObjectKeyFromObject(p))
		g.Expect(second.Status.ID).To(Equal(first.Status.ID))
		g.Expect(second.Status.CreatedAt.Time).To(BeTemporally("==", first.Status.CreatedAt.Time))
	}).Should(Succeed())
	calls = upserts(name)
	g.Expect(calls).To(HaveLen(2))
	g.Expect(calls[1].Method).To(Equal("UpdatePipeline"))
	g.Expect(calls[1].Pipeline.GetId()).To(Equal(first.Status.ID), "updated by the recorded ID")
	g.Expect(calls[1].Pipeline.GetEnabled()).To(BeFalse())
	g.Expect(calls[1].Pipeline.Enabled).NotTo(BeNil(), "enabled=false is sent explicitly")
	g.Expect(calls[1].Pipeline.GetMatchers()).To(BeEmpty())
	g.Expect(srv.PipelineByName(name).GetEnabled()).To(BeFalse())
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns, "logs")).To(ContainElement("Updated")) }).Should(Succeed())

	// Delete removes the Fleet pipeline by the ID in status, then the CR.
	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(p), &fleetv1alpha1.Pipeline{}))
	}).Should(BeTrue())
	g.Expect(deletes()).To(ContainElement(first.Status.ID))
	g.Expect(srv.PipelineByName(name)).To(BeNil())
	g.Expect(upserts(name)).To(HaveLen(2), "no upsert after delete")

	g.Expect(before.delta(g, "fleet_api_requests_total", map[string]string{"operation": "CreatePipeline"})).To(BeNumerically(">=", 1))
	g.Expect(before.delta(g, "fleet_api_requests_total", map[string]string{"operation": "UpdatePipeline"})).To(BeNumerically(">=", 1))
	g.Expect(before.delta(g, "fleet_api_request_duration_seconds", map[string]string{"operation": "DeletePipeline", "status": "200"})).To(BeNumerically(">=", 1))
	g.Expect(before.delta(g, "fleet_api_rate_limiter_wait_duration_seconds", nil)).To(BeNumerically(">=", 3))
	g.Expect(before.delta(g, "fleet_resource_synced_total", map[string]string{"kind": "Pipeline", "reason": "Synced"})).To(BeNumerically(">=", 2))
	g.Expect(before.delta(g, "fleet_resource_synced_total", map[string]string{"kind": "Pipeline", "reason": "Deleted"})).To(BeNumerically(">=", 1))
	g.Expect(metricValue(g, "fleet_resource_sync_age_seconds", map[string]string{"kind": "Pipeline"})).To(BeNumerically(">", 0))
}

func TestPipelineUpsert404RecreatesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(ns, "vanishing", nil)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	var first *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { first = synced(g, client.ObjectKeyFromObject(p)) }).Should(Succeed())

	// The drift check would repair the vanished pipeline on its own and race the update this test is about:
	// its lists fail while the test runs.
	srv.InjectFault(fleetserver.Fault{Method: "ListPipelines", Caller: fleet.DriftCaller, Code: connect.CodeUnavailable})
	t.Cleanup(srv.ClearFaults)
	before := takeSnapshot(g)
	srv.VanishPipeline("vanishing")
	first.Spec.Contents = `logging { level = "debug" }`
	g.Expect(env.Client.Update(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again := synced(g, client.ObjectKeyFromObject(p))
		g.Expect(again.Status.ID).NotTo(Equal(first.Status.ID), "recreated under a new ID")
		g.Expect(eventReasons(g, ns, "vanishing")).To(ContainElement("Recreated"))
	}).Should(Succeed())
	g.Expect(upserts("vanishing")).To(HaveLen(3), "create, the 404, and the recreate")
	g.Expect(before.delta(g, "fleet_api_errors_total", map[string]string{"operation": "UpdatePipeline", "status": "404"})).To(Equal(1.0))
}

func TestPipeline400IsAValidationErrorWithoutRetry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	srv.InjectFault(fleetserver.Fault{Method: "CreatePipeline", Code: connect.CodeInvalidArgument, Times: 1})
	p := newPipeline(ns, "rejected", nil)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonValidationError))
		g.Expect(eventReasons(g, ns, "rejected")).To(ContainElement("ValidationFailed"))
	}).Should(Succeed())
	g.Consistently(func() int { return len(upserts("rejected")) }, "2s").Should(Equal(1), "no retry until the spec changes")

	// A spec change tries again.
	got := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	got.Spec.Contents = "logging {}"
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) { synced(g, client.ObjectKeyFromObject(p)) }).Should(Succeed())
}

func TestReadOnlyAndGrafanaPipelinesAreNeverDeletedRemotely(t *testing.T) {
	ctx := context.Background()
	for name, mutate := range map[string]func(*fleetv1alpha1.Pipeline){
		"read-only after sync": nil,
		"grafana-sourced": func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGrafana, Namespace: "grafana-cloud"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			p := newPipeline(ns, "kept", func(p *fleetv1alpha1.Pipeline) {
				p.Spec.Name = ns + "-kept"
				if mutate != nil {
					mutate(p)
				}
			})
			g.Expect(env.Client.Create(ctx, p)).To(Succeed())
			var got *fleetv1alpha1.Pipeline
			g.Eventually(func(g Gomega) { got = synced(g, client.ObjectKeyFromObject(p)) }).Should(Succeed())
			if mutate == nil {
				got.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: fleetv1alpha1.ImportModeReadOnly}
				g.Expect(env.Client.Update(ctx, got)).To(Succeed())
				g.Eventually(func(g Gomega) {
					ro := synced(g, client.ObjectKeyFromObject(p))
					g.Expect(meta.FindStatusCondition(ro.Status.Conditions, fleetv1alpha1.ConditionReady).Reason).To(Equal(fleetv1alpha1.ReasonReadOnly))
				}).Should(Succeed())
				g.Expect(upserts(ns+"-kept")).To(HaveLen(1), "read-only makes no upsert")
			}
			g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(p), &fleetv1alpha1.Pipeline{}))
			}).Should(BeTrue())
			g.Expect(deletes()).NotTo(ContainElement(got.Status.ID))
			g.Expect(srv.PipelineByName(ns+"-kept")).NotTo(BeNil(), "the Fleet pipeline survives")
		})
	}
}

func TestAnnotationCannotDriveADelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// Someone else's pipeline in Fleet.
	victim := newPipeline(ns, "victim", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-victim" })
	g.Expect(env.Client.Create(ctx, victim)).To(Succeed())
	var v *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { v = synced(g, client.ObjectKeyFromObject(victim)) }).Should(Succeed())
	// Keep the victim's CR from deleting it at the end: it only stands in for a pipeline made elsewhere.
	v.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: fleetv1alpha1.ImportModeReadOnly}
	g.Expect(env.Client.Update(ctx, v)).To(Succeed())

	for _, paused := range []bool{true, false} {
		attacker := newPipeline(ns, "attacker", func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Paused = paused
			p.Annotations = map[string]string{fleetv1alpha1.AnnotationFleetPipelineID: v.Status.ID}
		})
		g.Expect(env.Client.Create(ctx, attacker)).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := &fleetv1alpha1.Pipeline{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(attacker), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			if !paused {
				g.Expect(got.Status.ID).NotTo(Equal(v.Status.ID))
			}
		}).Should(Succeed())
		g.Expect(env.Client.Delete(ctx, attacker)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(attacker), &fleetv1alpha1.Pipeline{}))
		}).Should(BeTrue())
		g.Expect(deletes()).NotTo(ContainElement(v.Status.ID))
		g.Expect(srv.PipelineByName(ns+"-victim")).NotTo(BeNil(), "paused=%v", paused)
	}
}

func TestSameNameInTwoNamespacesIsACollision(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns1, ns2 := newNamespace(t), newNamespace(t)
	shared := ns1 + "-shared"
	a := newPipeline(ns1, "a", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = shared })
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(func(g Gomega) { synced(g, client.ObjectKeyFromObject(a)) }).Should(Succeed())

	b := newPipeline(ns2, "b", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = shared
		p.Spec.Contents = "different {}"
	})
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonNameCollision))
		g.Expect(ready.Message).To(ContainSubstring(ns1 + "/a"))
		g.Expect(eventReasons(g, ns2, "b")).To(ContainElement(fleetv1alpha1.ReasonNameCollision))
	}).Should(Succeed())
	g.Consistently(func() int { return len(upserts(shared)) }, "1s").Should(Equal(1), "the second CR never overwrites the first")
	g.Expect(srv.PipelineByName(shared).GetContents()).To(Equal(a.Spec.Contents))

	// The namespace name scope gives b its own Fleet pipeline.
	got := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	got.Annotations = map[string]string{fleetv1alpha1.AnnotationNameScope: fleetv1alpha1.NameScopeNamespace}
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(synced(g, client.ObjectKeyFromObject(b)).Status.SyncedName).To(Equal(ns2 + "." + shared))
	}).Should(Succeed())
	g.Expect(srv.PipelineByName(shared).GetContents()).To(Equal(a.Spec.Contents))

	// When the holder renames itself away, a waiting Pipeline gets the name.
	ns3 := newNamespace(t)
	c := newPipeline(ns3, "c", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = shared
		p.Spec.Contents = "third {}"
	})
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(
			HaveField("Reason", fleetv1alpha1.ReasonNameCollision))
	}).Should(Succeed())
	holder := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), holder)).To(Succeed())
	holder.Spec.Name = shared + "-renamed"
	g.Expect(env.Client.Update(ctx, holder)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(synced(g, client.ObjectKeyFromObject(c)).Status.SyncedName).To(Equal(shared))
	}).Should(Succeed())
	g.Expect(srv.PipelineByName(shared).GetContents()).To(Equal("third {}"))
}

func TestPipelineWebhookRejections(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for name, tc := range map[string]struct {
		mutate   func(*fleetv1alpha1.Pipeline)
		wantText []string
	}{
		"otel yaml as alloy": {func(p *fleetv1alpha1.Pipeline) { p.Spec.Contents = "receivers:\n  otlp: {}\n" },
			[]string{"spec.contents", "set configType to OpenTelemetryCollector"}},
		"otel without service": {func(p *fleetv1alpha1.Pipeline) {
			p.Spec.ConfigType = fleetv1alpha1.ConfigTypeOTel
			p.Spec.Contents = "receivers: {}\n"
		}, []string{"spec.contents", "service key"}},
		"bad matcher": {func(p *fleetv1alpha1.Pipeline) { p.Spec.Matchers = []string{"env==prod"} },
			[]string{"spec.matchers[0]", `"==" is not supported`}},
		"git without namespace": {func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGit}
		}, []string{"spec.source.namespace", "required"}},
		"grafana adopt": {func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGrafana, Namespace: "g"}
			p.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: "adopt"}
		}, []string{"spec.source.type", "cannot be adopted"}},
		"name with whitespace": {func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = "my pipeline" }, []string{"spec.name"}},
		"empty contents":       {func(p *fleetv1alpha1.Pipeline) { p.Spec.Contents = "" }, []string{"spec.contents"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, newPipeline(ns, "bad", tc.mutate))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, s := range tc.wantText {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
	g := NewWithT(t)
	g.Expect(upserts("bad")).To(BeEmpty())
	err := env.Client.Create(ctx, newPipeline(ns, "bad", func(p *fleetv1alpha1.Pipeline) { p.Spec.Matchers = []string{"env==prod"} }))
	g.Expect(err).To(MatchError(ContainSubstring(`admission webhook "vpipeline-v1alpha1.fleetmanagement.grafana.com" denied the request`)))
}

// sliding reports the largest number of calls inside any window of the given length.
func sliding(times []time.Time, window time.Duration) int {
	most := 0
	for i := range times {
		n := 0
		for j := i; j < len(times) && times[j].Sub(times[i]) < window; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

func TestPipeline5xxIsRetriedWithBackoff(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	before := takeSnapshot(g)
	srv.InjectFault(fleetserver.Fault{Method: "CreatePipeline", Code: connect.CodeUnavailable, Times: 2})
	p := newPipeline(ns, "flaky", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-flaky" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) { synced(g, client.ObjectKeyFromObject(p)) }).Should(Succeed())
	g.Expect(upserts(ns+"-flaky")).To(HaveLen(3), "two 503s, then the success")
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, ns, "flaky")).To(ContainElements(fleetv1alpha1.ReasonSyncFailed, "Created"))
	}).Should(Succeed())
	g.Expect(before.delta(g, "fleet_api_errors_total", map[string]string{"operation": "CreatePipeline", "status": "503"})).To(Equal(2.0))
}
