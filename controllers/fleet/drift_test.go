package fleet_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestPipelineEditedInFleetIsRepairedWithAnEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	name := ns + "-drifting"
	p := newPipeline(ns, "drifting", func(p *fleetv1alpha1.Pipeline) {
		p.Spec.Name, p.Spec.Matchers = name, []string{`env="prod"`}
	})
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var cr *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { cr = synced(g, key) }).Should(Succeed())
	drifted := metricValue(g, "fleet_pipeline_drift_total", map[string]string{"field": "contents"})

	// Someone edits it in the Grafana UI (the marker stays: it is the same pipeline).
	edited := srv.PipelineByName(name)
	edited.Contents, edited.Matchers = `logging { level = "debug" }`, []string{`env="dev"`}
	srv.PutPipeline(edited)

	g.Eventually(func(g Gomega) {
		now := srv.PipelineByName(name)
		g.Expect(now.GetContents()).To(Equal(cr.Spec.Contents), "the CR is the source of truth")
		g.Expect(now.GetMatchers()).To(Equal(cr.Spec.Matchers))
		g.Expect(now.GetId()).To(Equal(cr.Status.ID))
		events := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "DriftRepaired"),
			HaveField("Note", ContainSubstring("(contents, matchers)")))), "the event names what changed")
	}).Should(Succeed())
	g.Expect(metricValue(g, "fleet_pipeline_drift_total", map[string]string{"field": "contents"}) - drifted).To(BeNumerically(">=", 1))
	g.Expect(synced(g, key).Status.ID).To(Equal(cr.Status.ID))
}
