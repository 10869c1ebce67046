package gnmic_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// eventsAbout returns the events recorded about an object with the given reason.
func eventsAbout(g Gomega, ns, name, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// tsMetric returns the series of a gnmic_operator_targetsource_* family for one TargetSource, keyed by the
// value of keyLabel ("" when the family has no such label).
func tsMetric(g Gomega, family string, ts types.NamespacedName, keyLabel string) map[string]*dto.Metric {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]*dto.Metric{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "namespace") == ts.Namespace && label(m, "name") == ts.Name {
				out[label(m, keyLabel)] = m
			}
		}
	}
	return out
}

// Events are recorded on the transitions only (stall, first failure, first success, conflict), and the four
// metrics carry the values of the runs.
func TestTargetSourceEventsAndMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	inv := newInventory(t)
	inv.set(func(i *inventory) {
		i.token = "t1"
		i.devices = devices("a", "b", "c")
		i.devices[2]["mgmt_ip"] = "bad host!"
	})
	g.Expect(env.Client.Create(ctx, target(ns, "obs-b", "192.0.2.1:57400", "mine"))).To(Succeed())
	ts := httpSource(ns, "obs", inv.srv.URL)
	key := client.ObjectKeyFromObject(ts)
	ts.Spec.Source.HTTP.Auth = &gnmicv1alpha1.HTTPAuth{Token: &gnmicv1alpha1.TokenAuth{
		SecretRef: gnmicv1alpha1.SecretKeyRef{Name: "obs-creds", Key: "token"}}}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())

	// The Secret is missing: Stalled, with one Warning event, also after a second stalled run.
	waitReason(t, ns, "obs", gnmicv1alpha1.ReasonSecretNotFound)
	requestRun(t, ns, "obs")
	g.Eventually(func(g Gomega) { g.Expect(eventsAbout(g, ns, "obs", gnmicv1alpha1.ReasonSecretNotFound)).To(HaveLen(1)) }).Should(Succeed())

	// The Secret appears: the run succeeds with one Normal event, and the conflict with the hand-written obs-b
	// is reported once.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "obs-creds"},
		StringData: map[string]string{"token": "t1"}})).To(Succeed())
	got := waitReason(t, ns, "obs", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(got.Status.Managed).To(Equal(int32(1)))
	g.Expect(got.Status.Conflicted).To(Equal(int32(1)))
	g.Expect(got.Status.Invalid).To(Equal(int32(1)))
	// A second successful run; it must have ended before the inventory fails below, or it would fetch the failure.
	// The run's counter is incremented after its status and events are written, so it marks the run's end.
	requestRun(t, ns, "obs")
	g.Eventually(func(g Gomega) {
		g.Expect(tsMetric(g, "gnmic_operator_targetsource_sync_total", key, "result")["success"].GetCounter().GetValue()).To(Equal(2.0))
	}).Should(Succeed())

	// A failure afterwards: its event is recorded after those of the earlier runs, so once it is visible the
	// earlier ones can be counted.
	inv.set(func(i *inventory) { i.status = http.StatusServiceUnavailable })
	requestRun(t, ns, "obs")
	waitReason(t, ns, "obs", gnmicv1alpha1.ReasonFetchFailed)
	g.Eventually(func(g Gomega) { g.Expect(eventsAbout(g, ns, "obs", gnmicv1alpha1.ReasonFetchFailed)).To(HaveLen(1)) }).Should(Succeed())
	for reason, typ := range map[string]string{
		gnmicv1alpha1.ReasonSecretNotFound: corev1.EventTypeWarning,
		gnmicv1alpha1.ReasonSucceeded:      corev1.EventTypeNormal,
		gnmicv1alpha1.ReasonNameConflict:   corev1.EventTypeWarning,
		gnmicv1alpha1.ReasonFetchFailed:    corev1.EventTypeWarning,
	} {
		evs := eventsAbout(g, ns, "obs", reason)
		g.Expect(evs).To(HaveLen(1), reason)
		g.Expect(evs[0].Type).To(Equal(typ), reason)
		g.Expect(evs[0].Series).To(BeNil(), "%s was recorded again", reason)
	}

	// Metrics: two failures (stalled twice), two successes, one fetch failure, every run timed; the last
	// success is the injected clock's time; the Target counts are those of the last run that got that far.
	total := tsMetric(g, "gnmic_operator_targetsource_sync_total", key, "result")
	g.Expect(total["success"].GetCounter().GetValue()).To(Equal(2.0))
	g.Expect(total["failure"].GetCounter().GetValue()).To(BeNumerically(">=", 3.0))
	runsTotal := total["success"].GetCounter().GetValue() + total["failure"].GetCounter().GetValue()
	duration := tsMetric(g, "gnmic_operator_targetsource_sync_duration_seconds", key, "type")
	g.Expect(duration["HTTP"].GetHistogram().GetSampleCount()).To(Equal(uint64(runsTotal)))
	last := tsMetric(g, "gnmic_operator_targetsource_last_success_timestamp_seconds", key, "")
	g.Expect(last[""].GetGauge().GetValue()).To(Equal(float64(got.Status.LastSuccessfulSyncTime.Unix())))
	targets := tsMetric(g, "gnmic_operator_targetsource_targets", key, "state")
	g.Expect(targets["managed"].GetGauge().GetValue()).To(Equal(1.0))
	g.Expect(targets["invalid"].GetGauge().GetValue()).To(Equal(1.0))
	g.Expect(targets["conflicted"].GetGauge().GetValue()).To(Equal(1.0))
	// The interval GNMIcTargetSourceStale compares the last-success age with.
	interval := tsMetric(g, "gnmic_operator_targetsource_interval_seconds", key, "")
	g.Expect(interval[""].GetGauge().GetValue()).To(Equal(got.Spec.Interval.Seconds()))

	// Deleting the TargetSource drops its series.
	g.Expect(env.Client.Delete(ctx, ts)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(tsMetric(g, "gnmic_operator_targetsource_targets", key, "state")).To(BeEmpty())
		g.Expect(tsMetric(g, "gnmic_operator_targetsource_sync_total", key, "result")).To(BeEmpty())
		g.Expect(tsMetric(g, "gnmic_operator_targetsource_interval_seconds", key, "")).To(BeEmpty())
	}).Should(Succeed())
}
