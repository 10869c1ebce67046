package gnmic_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func staticSource(ns, name string, devices ...gnmicv1alpha1.StaticDevice) *gnmicv1alpha1.TargetSource {
	return &gnmicv1alpha1.TargetSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.TargetSourceSpec{
			Source: gnmicv1alpha1.InventorySource{Type: "Static", Static: &gnmicv1alpha1.StaticSource{Devices: devices}},
			Target: gnmicv1alpha1.TargetTemplate{Profile: "default"},
		},
	}
}

func dev(name, address string) gnmicv1alpha1.StaticDevice {
	return gnmicv1alpha1.StaticDevice{Name: name, Address: address}
}

func getTS(g Gomega, ns, name string) *gnmicv1alpha1.TargetSource {
	ts := &gnmicv1alpha1.TargetSource{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, ts)).To(Succeed())
	return ts
}

// readyReason waits until the TargetSource's Ready condition has the reason and returns the TargetSource.
func waitReason(t *testing.T, ns, name, reason string) *gnmicv1alpha1.TargetSource {
	t.Helper()
	var ts *gnmicv1alpha1.TargetSource
	NewWithT(t).Eventually(func(g Gomega) {
		ts = getTS(g, ns, name)
		c := meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(ts.Status.ObservedGeneration).To(Equal(ts.Generation))
		g.Expect(c.Reason).To(Equal(reason), "message: %s", c.Message)
	}).Should(Succeed())
	return ts
}

// targetsOf lists the Targets carrying the TargetSource label, by name.
func targetsOf(g Gomega, ns, name string) map[string]gnmicv1alpha1.Target {
	list := &gnmicv1alpha1.TargetList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{gnmicv1alpha1.LabelTargetSource: name})).To(Succeed())
	out := map[string]gnmicv1alpha1.Target{}
	for _, t := range list.Items {
		out[t.Name] = t
	}
	return out
}

func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// runs is how many runs the TargetSource has finished, from gnmic_operator_targetsource_sync_total.
func runs(g Gomega, ns, name string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "gnmic_operator_targetsource_sync_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "namespace") == ns && label(m, "name") == name {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

var refreshCounter int

// requestRun asks for a run through the requested-at annotation (what the refresh API sets) and waits until it
// has finished.
func requestRun(t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	before := runs(g, ns, name)
	refreshCounter++
	ts := &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gnmicv1alpha1.AnnotationRequestedAt,
		time.Now().Add(time.Duration(refreshCounter)*time.Microsecond).Format(time.RFC3339Nano))
	g.Expect(env.Client.Patch(context.Background(), ts, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) { g.Expect(runs(g, ns, name)).To(BeNumerically(">", before)) }).Should(Succeed())
}

var _ = ptr.To[int32]
