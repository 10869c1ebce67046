package gnmic_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// outputInstances reads Cluster "split"'s status.outputInstances as name → processorsDigest, untyped, so the test also
// runs (and fails) against an API without the field.
func outputInstances(g Gomega, ns string) map[string]string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gnmicv1alpha1.GroupVersion.WithKind("Cluster"))
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "split"}, u)).To(Succeed())
	list, _, err := unstructured.NestedSlice(u.Object, "status", "outputInstances")
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, item := range list {
		m, _ := item.(map[string]any)
		name, _ := m["name"].(string)
		digest, _ := m["processorsDigest"].(string)
		out[name] = digest
	}
	return out
}

// Two Pipelines share the prometheus Output "prom" with the same (no) processors: one gNMIc output ns/prom. When
// Pipeline b gains a processor, only b's data moves to a split-off instance (ns/b/prom, on the next free port);
// a's subscription keeps naming ns/prom, whose config and port stay as they were, so nothing of a's restarts.
// The instances are recorded in status.outputInstances, which is what keeps the name across plans.
func TestOutputNamesStayWhenAPipelinesProcessorsDiverge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	fleet(g, ns, 2)
	g.Expect(env.Client.Create(ctx, cluster(g, ns, "split", 1, servers))).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Processor{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drop-down"},
		Spec: gnmicv1alpha1.ProcessorSpec{Type: "event-drop",
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"condition":".values.oper-status == \"DOWN\""}`)}}})).To(Succeed())
	a, b := pipelineFor(ns, "a", "split"), pipelineFor(ns, "b", "split")
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())

	shared := ns + "/prom"
	g.Eventually(func(g Gomega) {
		held := servers[0].Config()
		g.Expect(held.Outputs).To(HaveLen(1))
		g.Expect(held.Outputs).To(HaveKey(shared))
		g.Expect(held.Subscriptions[ns+"/a/ifaces"].Outputs).To(Equal([]string{shared}))
		g.Expect(held.Subscriptions[ns+"/b/ifaces"].Outputs).To(Equal([]string{shared}))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	before := servers[0].Config()

	// A merge patch of b's spec alone: the Pipeline controller writes its status meanwhile.
	g.Expect(env.Client.Patch(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"outputs":{"processorRefs":["drop-down"]}}}`)))).To(Succeed())

	split := ns + "/b/prom"
	g.Eventually(func(g Gomega) {
		held := servers[0].Config()
		g.Expect(held.Outputs).To(HaveKey(split))
		g.Expect(held.Outputs[split]["event-processors"]).To(Equal([]any{ns + "/drop-down"}))
		g.Expect(held.Subscriptions[ns+"/b/ifaces"].Outputs).To(Equal([]string{split}))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	held := servers[0].Config()
	g.Expect(held.Subscriptions[ns+"/a/ifaces"].Outputs).To(Equal([]string{shared}), "a's subscription keeps its output")
	g.Expect(held.Subscriptions[ns+"/a/ifaces"]).To(Equal(before.Subscriptions[ns+"/a/ifaces"]), "a's subscription is unchanged")
	g.Expect(held.Outputs).To(HaveLen(2))
	g.Expect(held.Outputs[shared]).To(Equal(before.Outputs[shared]), "the shared instance is unchanged, listener and all")
	g.Expect(held.Outputs[split]["listen"]).To(Equal(":9805"), "the split-off instance takes the next free port")
	g.Expect(outputInstances(g, ns)).To(HaveLen(2))
	g.Expect(outputInstances(g, ns)).To(HaveKeyWithValue(shared, ""))
	g.Expect(outputInstances(g, ns)[split]).To(HaveLen(16))
	g.Eventually(func(g Gomega) {
		for name, port := range map[string]int32{"gnmic-split-prom": 9804, "gnmic-split-b-prom": 9805} {
			svc := &corev1.Service{}
			g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)).To(Succeed())
			g.Expect(svc.Spec.Ports).To(HaveLen(1))
			g.Expect(svc.Spec.Ports[0].Port).To(Equal(port), name)
		}
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// b drops the processor again: it rejoins ns/prom and the split-off instance goes, from status too.
	g.Expect(env.Client.Patch(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"outputs":{"processorRefs":null}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		held := servers[0].Config()
		g.Expect(held.Outputs).To(HaveLen(1))
		g.Expect(held.Outputs[shared]).To(Equal(before.Outputs[shared]))
		g.Expect(held.Subscriptions[ns+"/b/ifaces"].Outputs).To(Equal([]string{shared}))
		g.Expect(outputInstances(g, ns)).To(Equal(map[string]string{shared: ""}))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
