// Package fleet benchmarks the Pipeline controller against the local Fleet Management server at the default
// Fleet API budget (3 requests per second, burst 50).
package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetcontrollers "github.com/quartet-dev/quartet-operator/controllers/fleet"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

const (
	pipelines = 1000
	rps       = fleetclient.DefaultRPS
	burst     = fleetclient.DefaultBurst
)

// BenchmarkThousandPipelinesAtDefaultRate creates 1,000 Pipelines at once and lets the controller sync them at
// 3 requests per second. It takes about (1000-50)/3 ≈ 317 s of wall time.
func BenchmarkThousandPipelinesAtDefaultRate(b *testing.B) {
	for range b.N {
		runThousand(b)
	}
}

func runThousand(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	srv := fleetserver.New("bench", "token")
	srv.Start()
	defer srv.Close()

	// Baseline, measured in the same run: the same 1,000 upserts through the same client with no rate limit.
	direct, err := fleetclient.New(fleetclient.Config{BaseURL: srv.URL(), Username: "bench", Password: "token",
		CAPEM: srv.CAPEM(), Limiter: rate.NewLimiter(rate.Inf, 1)})
	g.Expect(err).NotTo(HaveOccurred())
	baseStart := time.Now()
	for i := range pipelines {
		_, err := direct.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: fmt.Sprintf("baseline-%04d", i), Contents: "logging {}"}, false)
		g.Expect(err).NotTo(HaveOccurred())
	}
	baseline := time.Since(baseStart)
	srv.ResetCalls()
	// The histogram is process-wide: remember what the baseline put in it, to report the controller's waits only.
	_, baselineWaits := limiterWaits(g)

	env, err := testenv.Start(testenv.Options{
		Controllers: []string{fleetcontrollers.PipelineControllerName},
		Manager: func(o *manager.Options) {
			o.FleetCredentialsSecret = "fleet-system/fleet-credentials"
			o.FleetAPIRPS, o.FleetAPIBurst = rps, burst
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Stop() }()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-system", Name: "fleet-credentials"}, Data: map[string][]byte{
			"base-url": []byte(srv.URL()), "username": []byte("bench"), "password": []byte("token"), "ca.crt": srv.CAPEM()}},
	} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}

	b.ResetTimer()
	start := time.Now()
	for i := range pipelines {
		g.Expect(env.Client.Create(ctx, &fleetv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("p-%04d", i)},
			Spec:       fleetv1alpha1.PipelineSpec{Contents: fmt.Sprintf("logging { level = \"info\" } // %d", i)},
		})).To(Succeed())
	}
	created := time.Since(start)
	g.Eventually(func(g Gomega) {
		list := &fleetv1alpha1.PipelineList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace("bench"))).To(Succeed())
		ready := 0
		for _, p := range list.Items {
			if meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ConditionReady) {
				ready++
			}
		}
		g.Expect(ready).To(Equal(pipelines))
	}, 10*time.Minute, time.Second).Should(Succeed())
	total := time.Since(start)
	b.StopTimer()

	calls := srv.CallsTo("CreatePipeline")
	g.Expect(calls).To(HaveLen(pipelines), "exactly one create per Pipeline")
	g.Expect(srv.Calls()).To(HaveLen(pipelines), "no other Fleet call")
	times := make([]time.Time, len(calls))
	for i, c := range calls {
		times[i] = c.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	afterBurst := times[burst:]
	window := afterBurst[len(afterBurst)-1].Sub(afterBurst[0])
	achieved := float64(len(afterBurst)-1) / window.Seconds()
	idealSeconds := float64(pipelines-burst) / rps
	ideal := time.Duration(idealSeconds * float64(time.Second))

	// A no-op resync: a restarted manager reconciles every Pipeline again and calls Fleet zero times.
	before := len(srv.Calls())
	g.Expect(env.RestartManager()).To(Succeed())
	g.Consistently(func() int { return len(srv.Calls()) - before }, 5*time.Second).Should(BeZero())
	resyncCalls := len(srv.Calls()) - before

	b.ReportMetric(achieved, "upserts/s")
	b.ReportMetric(achieved/rps, "rate-ratio")
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n1,000 Pipelines at --fleet-api-rps %d --fleet-api-burst %d\n\n", rps, burst)
	fmt.Fprintf(&sb, "| measure | value | ratio |\n|---|---|---|\n")
	fmt.Fprintf(&sb, "| baseline: 1,000 direct upserts, no limiter | %s | 1.00 |\n", baseline.Round(time.Millisecond))
	fmt.Fprintf(&sb, "| creating 1,000 CRs | %s | %.2f |\n", created.Round(time.Millisecond), created.Seconds()/baseline.Seconds())
	fmt.Fprintf(&sb, "| all 1,000 Ready | %s | %.1f |\n", total.Round(time.Second), total.Seconds()/baseline.Seconds())
	fmt.Fprintf(&sb, "| ideal at the budget ((1000-%d)/%d s) | %s | %.1f |\n", burst, rps, ideal.Round(time.Second), ideal.Seconds()/baseline.Seconds())
	fmt.Fprintf(&sb, "| CreatePipeline calls | %d | %.2f per Pipeline |\n", len(calls), float64(len(calls))/pipelines)
	fmt.Fprintf(&sb, "| achieved rate after the burst | %.3f/s | %.1f%% of %d/s |\n", achieved, 100*achieved/rps, rps)
	fmt.Fprintf(&sb, "| calls on a no-op resync (restart) | %d | |\n", resyncCalls)
	sb.WriteString("\nfleet_api_rate_limiter_wait_duration_seconds of the controller's calls (cumulative):\n\n| le | count |\n|---|---|\n")
	h, _ := limiterWaits(g)
	count, sum := h.GetSampleCount()-baselineWaits.GetSampleCount(), h.GetSampleSum()-baselineWaits.GetSampleSum()
	for i, bk := range h.GetBucket() {
		fmt.Fprintf(&sb, "| %g | %d |\n", bk.GetUpperBound(), bk.GetCumulativeCount()-baselineWaits.GetBucket()[i].GetCumulativeCount())
	}
	fmt.Fprintf(&sb, "| +Inf | %d |\n\nmean wait %.3f s over %d calls\n", count, sum/float64(count), count)
	fmt.Print(sb.String())
	g.Expect(achieved).To(BeNumerically(">=", 0.95*rps), "achieved rate after the burst")
	g.Expect(resyncCalls).To(BeZero())
}

// limiterWaits returns the process-wide limiter wait histogram, twice (a value to read and a copy to keep).
func limiterWaits(g Gomega) (*dto.Histogram, *dto.Histogram) {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == "fleet_api_rate_limiter_wait_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			return h, proto.Clone(h).(*dto.Histogram)
		}
	}
	g.Expect("fleet_api_rate_limiter_wait_duration_seconds").To(BeEmpty(), "metric not registered")
	return nil, nil
}
