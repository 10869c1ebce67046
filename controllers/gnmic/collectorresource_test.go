package gnmic_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// collectorResource is any of the five collector-configuration kinds, with the status the controller writes.
type collectorResource interface {
	client.Object
	CollectorStatus() *gnmicv1alpha1.CollectorResourceStatus
}

// sampleCollectorResources loads the five collector-configuration samples (valid by construction: the bundle
// tests admit them) into ns.
func sampleCollectorResources(t *testing.T, ns string) map[string]collectorResource {
	t.Helper()
	objs := map[string]collectorResource{
		"subscription": &gnmicv1alpha1.Subscription{}, "output": &gnmicv1alpha1.Output{}, "input": &gnmicv1alpha1.Input{},
		"processor": &gnmicv1alpha1.Processor{}, "tunneltargetpolicy": &gnmicv1alpha1.TunnelTargetPolicy{},
	}
	for file, obj := range objs {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "gnmic_v1alpha1_"+file+".yaml"))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(yaml.Unmarshal(data, obj)).To(Succeed())
		obj.SetNamespace(ns)
		obj.SetLabels(map[string]string{"telemetry.example.com/set": "base"})
	}
	return objs
}

// expectStatus waits until obj's status names exactly pipelines, is Ready=True Valid and describes its generation.
func expectStatus(g Gomega, obj collectorResource, pipelines ...string) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		s := obj.CollectorStatus()
		g.Expect(s.ObservedGeneration).To(Equal(obj.GetGeneration()))
		if len(pipelines) == 0 {
			g.Expect(s.Pipelines).To(BeEmpty())
		} else {
			g.Expect(s.Pipelines).To(Equal(pipelines))
		}
		g.Expect(s.PipelinesCount).To(BeEquivalentTo(len(pipelines)))
		ready := meta.FindStatusCondition(s.Conditions, gnmicv1alpha1.CollectorResourceConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Reason).To(Equal(gnmicv1alpha1.ReasonValid))
	}).WithTimeout(20*time.Second).Should(Succeed(), "%T %s", obj, obj.GetName())
}

// pipelineReferencing names every sample by ref; pipelineSelecting selects them all by label.
func pipelineReferencing(ns, name string, objs map[string]collectorResource) *gnmicv1alpha1.GnmicPipeline {
	return &gnmicv1alpha1.GnmicPipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.PipelineSpec{
			ClusterRef:             "absent",
			SubscriptionRefs:       []string{objs["subscription"].GetName()},
			TunnelTargetPolicyRefs: []string{objs["tunneltargetpolicy"].GetName()},
			Outputs:                gnmicv1alpha1.PipelineOutputs{OutputRefs: []string{objs["output"].GetName()}},
			Inputs: gnmicv1alpha1.PipelineInputs{InputRefs: []string{objs["input"].GetName()},
				ProcessorRefs: []string{objs["processor"].GetName()}},
		},
	}
}

func pipelineSelecting(ns, name string) *gnmicv1alpha1.GnmicPipeline {
	sel := []metav1.LabelSelector{{MatchLabels: map[string]string{"telemetry.example.com/set": "base"}}}
	return &gnmicv1alpha1.GnmicPipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.PipelineSpec{
			ClusterRef: "absent", SubscriptionSelectors: sel, TunnelTargetPolicySelectors: sel,
			Outputs: gnmicv1alpha1.PipelineOutputs{OutputSelectors: sel, ProcessorSelectors: sel},
			Inputs:  gnmicv1alpha1.PipelineInputs{InputSelectors: sel},
		},
	}
}

// TestCollectorResourcesReportValidityAndTheirPipelines: every collector-configuration kind gets Ready and
// observedGeneration, and status.pipelines follows Pipelines that name or select it — created, changed, deleted —
// and the object's own label changes.
func TestCollectorResourcesReportValidityAndTheirPipelines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objs := sampleCollectorResources(t, ns)
	for _, obj := range objs {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}
	for _, obj := range objs {
		expectStatus(g, obj)
	}

	byRef, bySelector := pipelineReferencing(ns, "by-ref", objs), pipelineSelecting(ns, "by-selector")
	g.Expect(env.Client.Create(ctx, byRef)).To(Succeed())
	g.Expect(env.Client.Create(ctx, bySelector)).To(Succeed())
	for _, obj := range objs {
		expectStatus(g, obj, "by-ref", "by-selector")
	}

	// A Pipeline that stops naming the objects leaves their status.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(byRef), byRef); err != nil {
			return err
		}
		byRef.Spec = gnmicv1alpha1.PipelineSpec{ClusterRef: "absent"}
		return env.Client.Update(ctx, byRef)
	}).Should(Succeed())
	for _, obj := range objs {
		expectStatus(g, obj, "by-selector")
	}

	// An object whose labels no longer match leaves the selecting Pipeline; the others stay.
	out := objs["output"]
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(out), out); err != nil {
			return err
		}
		out.SetLabels(map[string]string{"telemetry.example.com/set": "other"})
		return env.Client.Update(ctx, out)
	}).Should(Succeed())
	expectStatus(g, out)
	expectStatus(g, objs["subscription"], "by-selector")

	g.Expect(env.Client.Delete(ctx, bySelector)).To(Succeed())
	for _, obj := range objs {
		expectStatus(g, obj)
	}
}

// TestCollectorResourceStatusStaysPutWhenNothingChanges: a Pipeline change that leaves an object's references as
// they were (toggling enabled on a Pipeline naming it) leaves its status, resourceVersion included, unchanged. (The
// API server also drops an empty patch, so that no request is sent at all is TestReconcileWritesStatusOnlyOnChange's
// job.)
func TestCollectorResourceStatusStaysPutWhenNothingChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objs := sampleCollectorResources(t, ns)
	sub := objs["subscription"]
	g.Expect(env.Client.Create(ctx, sub)).To(Succeed())
	p := pipelineReferencing(ns, "p", objs)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	expectStatus(g, sub, "p")
	version := sub.GetResourceVersion()

	for i := range 3 {
		g.Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			p.Spec.Enabled = i%2 == 0
			return env.Client.Update(ctx, p)
		}).Should(Succeed())
	}
	// The Pipeline's own controller settles on the last generation, proof the events were delivered; the
	// Subscription's status controller saw the same events.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
		g.Expect(sub.GetResourceVersion()).To(Equal(version), fmt.Sprintf("status rewritten: %+v", sub.CollectorStatus()))
	}).WithTimeout(2 * time.Second).Should(Succeed())
}
