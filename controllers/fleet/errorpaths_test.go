package fleet_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
)

func TestPipelineDelete404IsSuccessAnd5xxKeepsTheFinalizer(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		code      connect.Code
		times     int
		failsOnce bool
	}{
		"404 is success": {connect.CodeNotFound, 1, false},
		"503 is retried": {connect.CodeUnavailable, 2, true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			p := newPipeline(ns, "del", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-del" })
			g.Expect(env.Client.Create(ctx, p)).To(Succeed())
			key := client.ObjectKeyFromObject(p)
			var got *fleetv1alpha1.Pipeline
			g.Eventually(func(g Gomega) { got = synced(g, key) }).Should(Succeed())
			deleted := metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "Pipeline", "reason": "Deleted"})
			failed := metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "Pipeline", "reason": fleetv1alpha1.ReasonDeleteFailed})

			srv.InjectFault(fleetserver.Fault{Method: "DeletePipeline", Code: tc.code, Times: tc.times})
			g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
			if tc.failsOnce {
				g.Eventually(func(g Gomega) {
					g.Expect(eventReasons(g, ns, "del")).To(ContainElement("DeleteFailed"))
				}).Should(Succeed())
			}
			g.Eventually(gone(key)).Should(BeTrue())
			g.Expect(metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "Pipeline", "reason": "Deleted"}) - deleted).To(Equal(1.0))
			wantFailed := 0.0
			if tc.failsOnce {
				wantFailed = float64(tc.times)
				g.Expect(srv.PipelineByName(ns+"-del")).To(BeNil(), "the retried delete went through")
			}
			g.Expect(metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "Pipeline", "reason": fleetv1alpha1.ReasonDeleteFailed}) - failed).To(Equal(wantFailed))
		})
	}
}

func TestPipelineDeleteFailureReportsDeleteFailedAndKeepsTheFinalizer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(ns, "stuck", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-stuck" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var got *fleetv1alpha1.Pipeline
	g.Eventually(func(g Gomega) { got = synced(g, key) }).Should(Succeed())
	srv.InjectFault(fleetserver.Fault{Method: "DeletePipeline", Code: connect.CodeInternal})
	t.Cleanup(srv.ClearFaults)
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		now := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, key, now)).To(Succeed())
		g.Expect(now.Finalizers).To(ContainElement(fleetv1alpha1.PipelineFinalizer))
		ready := meta.FindStatusCondition(now.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonDeleteFailed))
	}).Should(Succeed())
	g.Expect(srv.PipelineByName(ns + "-stuck")).NotTo(BeNil())
	srv.ClearFaults()
	g.Eventually(gone(key), "30s").Should(BeTrue())
	g.Expect(srv.PipelineByName(ns + "-stuck")).To(BeNil())
}

func TestPipeline401ThenARotatedSecretSyncs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	secret := &corev1.Secret{}
	secretKey := client.ObjectKey{Namespace: "fleet-system", Name: "fleet-credentials"}
	rotate := func(password string) {
		g.Expect(env.Client.Get(ctx, secretKey, secret)).To(Succeed())
		secret.Data[fleetclient.SecretKeyPassword] = []byte(password)
		g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	}
	// The token is rotated in Fleet first: the cached client now gets 401.
	srv.SetCredentials("stack-42", "glc_rotated")
	t.Cleanup(func() {
		srv.SetCredentials("stack-42", "glc_token")
		rotate("glc_token")
	})
	errs401 := metricValue(g, "fleet_api_errors_total", map[string]string{"operation": "CreatePipeline", "status": "401"})
	p := newPipeline(ns, "rotated", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-rotated" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		got := readyOf(g, key)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady).Reason).To(Equal(fleetv1alpha1.ReasonSyncFailed))
	}).Should(Succeed())
	g.Expect(metricValue(g, "fleet_api_errors_total", map[string]string{"operation": "CreatePipeline", "status": "401"}) - errs401).To(BeNumerically(">=", 1))

	// The Secret is updated: the 401 dropped the cached client, so a retry reads the new token.
	rotate("glc_rotated")
	g.Eventually(func(g Gomega) { synced(g, key) }, "30s").Should(Succeed())
}

func TestCollector429HonoursRetryAfter(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		retryAfter time.Duration
		min, max   time.Duration
	}{
		"with Retry-After: 2": {2 * time.Second, 2 * time.Second, 8 * time.Second},
		"without Retry-After": {0, 10 * time.Second, 30 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			id := ns + "-limited"
			srv.PutCollector(&collectorv1.Collector{Id: id, CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY})
			// Every GetCollector is refused until this collector got its 429 (other tests' collectors poll too).
			srv.InjectFault(fleetserver.Fault{Method: "GetCollector", Code: connect.CodeResourceExhausted, RetryAfter: tc.retryAfter})
			t.Cleanup(srv.ClearFaults)
			c := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limited"},
				Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"k": "v"}}}
			g.Expect(env.Client.Create(ctx, c)).To(Succeed())
			calls := func() []fleetserver.Call {
				var out []fleetserver.Call
				for _, call := range srv.CallsTo("GetCollector") {
					if call.Request.(*collectorv1.GetCollectorRequest).GetId() == id {
						out = append(out, call)
					}
				}
				return out
			}
			// The first 429 this collector got (an earlier test's rotated credentials may cost it a 401 first).
			limited := func() int {
				for i, call := range calls() {
					if call.Code == connect.CodeResourceExhausted {
						return i
					}
				}
				return -1
			}
			g.Eventually(limited).Should(BeNumerically(">=", 0))
			srv.ClearFaults()
			g.Eventually(func(g Gomega) { collectorReady(g, client.ObjectKeyFromObject(c)) }, "40s").Should(Succeed())
			at, i := calls(), limited()
			g.Expect(len(at)).To(BeNumerically(">", i+1))
			gap := at[i+1].At.Sub(at[i].At)
			g.Expect(gap).To(BeNumerically(">=", tc.min), "retry waited for the server")
			g.Expect(gap).To(BeNumerically("<", tc.max))
			g.Expect(eventReasons(g, ns, "limited")).To(ContainElement("RateLimited"))
		})
	}
}

func TestPipelineDiscoveryListFailureIsNotReadyAndRecovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	putOTel(t, ns+"-listed", nil)
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lists"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	dKey := client.ObjectKeyFromObject(d)
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(pipelineDiscovery(g, dKey).Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())

	failed := metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "PipelineDiscovery", "reason": fleetv1alpha1.ReasonListFailed})
	srv.InjectFault(fleetserver.Fault{Method: "ListPipelines", Code: connect.CodeUnavailable, Times: 1})
	repoll(g, dKey, 2*time.Minute)
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, dKey)
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonListFailed))
	}).Should(Succeed())
	g.Expect(metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "PipelineDiscovery", "reason": fleetv1alpha1.ReasonListFailed}) - failed).To(Equal(1.0))
	repoll(g, dKey, 3*time.Minute)
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(pipelineDiscovery(g, dKey).Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())
}
