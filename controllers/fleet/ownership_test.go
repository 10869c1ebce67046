package fleet_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// outside stores a pipeline as the Grafana UI or Terraform would: no ownership marker.
func outside(name, contents string) *pipelinev1.Pipeline {
	return srv.PutPipeline(&pipelinev1.Pipeline{Name: name, Contents: contents, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY})
}

// writesTo are the recorded writes that carried a pipeline ID.
func writesTo(id string) []pipelineWrite {
	var out []pipelineWrite
	for _, w := range allWrites() {
		if w.Pipeline.GetId() == id {
			out = append(out, w)
		}
	}
	return out
}

func readyOf(g Gomega, key client.ObjectKey) *fleetv1alpha1.Pipeline {
	p := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(context.Background(), key, p)).To(Succeed())
	g.Expect(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionReady)).NotTo(BeNil())
	return p
}

func gone(key client.ObjectKey) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), key, &fleetv1alpha1.Pipeline{}))
	}
}

func TestPipelineNeverTakesOverAPipelineMadeElsewhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	theirs := outside(ns+"-ui", `ui { made = "elsewhere" }`)

	p := newPipeline(ns, "ui", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-ui" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		got := readyOf(g, key)
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonNameTaken))
		g.Expect(ready.Message).To(ContainSubstring(theirs.GetId()))
		g.Expect(got.Status.ID).To(BeEmpty(), "no ID is recorded for a pipeline the CR does not own")
		g.Expect(eventReasons(g, ns, "ui")).To(ContainElement(fleetv1alpha1.ReasonNameTaken))
	}).Should(Succeed())
	g.Consistently(func() []pipelineWrite { return writesTo(theirs.GetId()) }, "1s").Should(BeEmpty())
	g.Expect(srv.PipelineByName(ns + "-ui").GetContents()).To(Equal(theirs.GetContents()))

	// Deleting the CR leaves the pipeline it never owned.
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(gone(key)).Should(BeTrue())
	g.Expect(deletes()).NotTo(ContainElement(theirs.GetId()))
	g.Expect(srv.PipelineByName(ns + "-ui")).NotTo(BeNil())
}

func TestAdoptAnnotationTakesOverAndOwns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	theirs := outside(ns+"-tf", `tf { made = "by terraform" }`)

	p := newPipeline(ns, "tf", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = ns + "-tf"
		p.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: fleetv1alpha1.ImportModeAdopt}
	})
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var got *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) {
		got = synced(g, key)
		g.Expect(got.Status.ID).To(Equal(theirs.GetId()), "adopted under its existing ID")
		g.Expect(eventReasons(g, ns, "tf")).To(ContainElement("Adopted"))
	}).Should(Succeed())
	now := srv.PipelineByName(ns + "-tf")
	g.Expect(now.GetContents()).To(Equal(p.Spec.Contents))
	g.Expect(pipelines.OwnedBy(now, pipelines.Marker{Cluster: mustMarker(g, now).Cluster, Namespace: ns, Name: "tf", UID: string(got.UID)})).To(BeTrue())

	// Adopted means owned: deleting the CR deletes the pipeline.
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	g.Eventually(gone(key)).Should(BeTrue())
	g.Expect(srv.PipelineByName(ns + "-tf")).To(BeNil())
}

func mustMarker(g Gomega, p *pipelinev1.Pipeline) pipelines.Marker {
	m, ok := pipelines.MarkerOf(p)
	g.Expect(ok).To(BeTrue(), "marker in %v", p.GetMetadata())
	return m
}

func TestLostStatusIDReadoptsItsOwnPipeline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(ns, "mine", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-mine" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var first *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { first = synced(g, key) }).Should(Succeed())

	// status.id is lost (a restore from a backup without status, say), then the spec changes.
	lost := first.DeepCopy()
	lost.Status.ID = ""
	g.Expect(env.Client.Status().Update(ctx, lost)).To(Succeed())
	g.Expect(env.Client.Get(ctx, key, lost)).To(Succeed())
	lost.Spec.Contents = `logging { level = "warn" }`
	g.Expect(env.Client.Update(ctx, lost)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again := synced(g, key)
		g.Expect(again.Generation).To(Equal(lost.Generation))
		g.Expect(again.Status.ID).To(Equal(first.Status.ID), "the marker proves the pipeline is this CR's")
	}).Should(Succeed())
	g.Expect(srv.PipelineByName(ns + "-mine").GetContents()).To(Equal(lost.Spec.Contents))
}

func TestRenameIsMakeBeforeBreak(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(ns, "moving", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-old" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var first *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { first = synced(g, key) }).Should(Succeed())

	// The first delete of the old name fails: the CR reports it and tries again.
	srv.InjectFault(fleetserver.Fault{Method: "DeletePipeline", Code: connect.CodeUnavailable, Times: 1})
	first.Spec.Name = ns + "-new"
	g.Expect(env.Client.Update(ctx, first)).To(Succeed())
	var renamed *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) {
		renamed = synced(g, key)
		g.Expect(renamed.Status.SyncedName).To(Equal(ns + "-new"))
		g.Expect(renamed.Status.OrphanedPipelineIDs).To(BeEmpty())
		g.Expect(eventReasons(g, ns, "moving")).To(ContainElement("OrphanDeleteFailed"))
	}).Should(Succeed())
	g.Expect(renamed.Status.ID).NotTo(Equal(first.Status.ID))
	g.Expect(srv.PipelineByName(ns+"-old")).To(BeNil(), "the old name is deleted")
	g.Expect(srv.PipelineByName(ns + "-new")).NotTo(BeNil())

	// The new pipeline was created before the old one was deleted.
	var createdAt, deletedAt int
	for i, c := range srv.Calls() {
		switch r := c.Request.(type) {
		case *pipelinev1.CreatePipelineRequest:
			if r.GetPipeline().GetName() == ns+"-new" && createdAt == 0 {
				createdAt = i + 1
			}
		case *pipelinev1.DeletePipelineRequest:
			if r.GetId() == first.Status.ID && deletedAt == 0 {
				deletedAt = i + 1
			}
		}
	}
	g.Expect(createdAt).To(BeNumerically(">", 0))
	g.Expect(deletedAt).To(BeNumerically(">", createdAt))
}

func TestReadOnlyPipelineMirrorsItsFleetPipeline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	theirs := outside(ns+"-watched", `watched { v = 1 }`)

	p := newPipeline(ns, "watched", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name = ns + "-watched"
		p.Spec.Contents = theirs.GetContents()
		p.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: fleetv1alpha1.ImportModeReadOnly}
	})
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		got := synced(g, key)
		g.Expect(got.Status.ID).To(Equal(theirs.GetId()))
		g.Expect(got.Status.ContentsHash).To(Equal(pipelines.ContentsHash(theirs.GetContents())))
		g.Expect(got.Status.Enabled).To(HaveValue(BeTrue()))
		g.Expect(got.Status.UpdatedAt).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(writesTo(theirs.GetId())).To(BeEmpty(), "read-only never writes")

	// Switching it to managed does not make the mirrored ID its own.
	got := &fleetv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	got.Annotations = nil
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := meta.FindStatusCondition(readyOf(g, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonNameTaken))
	}).Should(Succeed())
	g.Expect(writesTo(theirs.GetId())).To(BeEmpty())
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	g.Eventually(gone(key)).Should(BeTrue())
	g.Expect(srv.PipelineByName(ns + "-watched")).NotTo(BeNil())
}
