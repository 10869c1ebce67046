// Package agentrax benchmarks the agentrax group against a real API server: 500 AgentDeployments in 5 tenants.
// It prints a table; the results are recorded in docs/performance.md.
package agentrax

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{
		Controllers: []string{agentrax.AgentDeploymentControllerName, agentrax.TenantQuotaControllerName},
	}))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func agent(ns, name string) *agentraxv1alpha1.AgentDeployment {
	return &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{
			Image: "ghcr.io/org/agent:v1", TenantRef: "quota",
			Replicas:  agentraxv1alpha1.ReplicasSpec{Min: 1, Max: 2, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		},
	}
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// count lists how many objects of each owned kind carry the agent label.
func count(ctx context.Context, b *testing.B) (deps, svcs, hpas, pms int) {
	sel := client.MatchingLabels{agentraxv1alpha1.LabelAgent: "true"}
	dl, sl, hl, pl := &appsv1.DeploymentList{}, &corev1.ServiceList{}, &autoscalingv2.HorizontalPodAutoscalerList{}, &monitoringv1.PodMonitorList{}
	for _, l := range []client.ObjectList{dl, sl, hl, pl} {
		if err := env.Client.List(ctx, l, sel); err != nil {
			b.Fatal(err)
		}
	}
	return len(dl.Items), len(sl.Items), len(hl.Items), len(pl.Items)
}

// versions maps every agentrax object and child to its resourceVersion.
func versions(ctx context.Context, b *testing.B) map[string]string {
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"ad": &agentraxv1alpha1.AgentDeploymentList{}, "tq": &agentraxv1alpha1.TenantQuotaList{},
		"dep": &appsv1.DeploymentList{}, "svc": &corev1.ServiceList{}, "hpa": &autoscalingv2.HorizontalPodAutoscalerList{},
		"pm": &monitoringv1.PodMonitorList{},
	}
	for kind, l := range lists {
		if err := env.Client.List(ctx, l); err != nil {
			b.Fatal(err)
		}
		items := metaItems(l)
		for _, o := range items {
			out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

func metaItems(l client.ObjectList) []metav1.Object {
	var out []metav1.Object
	switch l := l.(type) {
	case *agentraxv1alpha1.AgentDeploymentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *agentraxv1alpha1.TenantQuotaList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *appsv1.DeploymentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *autoscalingv2.HorizontalPodAutoscalerList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *monitoringv1.PodMonitorList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

func changed(before, after map[string]string) int {
	n := 0
	for k, v := range after {
		if before[k] != v {
			n++
		}
	}
	return n
}

// BenchmarkAgentrax500 creates QUARTET_BENCH_AGENTS (500) AgentDeployments in 5 tenants through the webhooks,
// waits for every child, watches a quiet window of QUARTET_BENCH_STEADY_SECONDS (120) for writes, forces a
// reconcile of every agent by changing each quota's spec and counts writes again, then measures admission
// latency with the agents present against ConfigMap creates (no webhook) as the baseline.
func BenchmarkAgentrax500(b *testing.B) {
	agents := envInt("QUARTET_BENCH_AGENTS", 500)
	steady := time.Duration(envInt("QUARTET_BENCH_STEADY_SECONDS", 120)) * time.Second
	const tenants, workers, probes = 5, 16, 200
	ctx := context.Background()
	for b.Loop() {
		run := fmt.Sprintf("%d", time.Now().UnixNano()%100000)
		var nss []string
		for i := range tenants {
			ns := fmt.Sprintf("bench-%s-t%d", run, i)
			nss = append(nss, ns)
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				b.Fatal(err)
			}
			tq := &agentraxv1alpha1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
				Spec: agentraxv1alpha1.TenantQuotaSpec{MaxAgents: int32(agents) + probes, MaxGPUs: 10000, MaxTotalReplicas: 10000, MaxReplicasPerAgent: 10}}
			if err := env.Client.Create(ctx, tq); err != nil {
				b.Fatal(err)
			}
		}

		// Create the agents concurrently, timing each create (admission included).
		start := time.Now()
		jobs := make(chan int)
		var mu sync.Mutex
		var createLat []time.Duration
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range jobs {
					t0 := time.Now()
					if err := env.Client.Create(ctx, agent(nss[i%tenants], fmt.Sprintf("agent-%03d", i))); err != nil {
						b.Error(err)
					}
					mu.Lock()
					createLat = append(createLat, time.Since(t0))
					mu.Unlock()
				}
			})
		}
		for i := range agents {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		admitted := time.Since(start)
		for {
			d, s, h, p := count(ctx, b)
			if d >= agents && s >= agents && h >= agents && p >= agents {
				break
			}
			if time.Since(start) > 20*time.Minute {
				b.Fatalf("children not created after 20m: %d %d %d %d", d, s, h, p)
			}
			time.Sleep(200 * time.Millisecond)
		}
		children := time.Since(start)

		// Let status settle, then watch a quiet window.
		for prev := versions(ctx, b); ; {
			time.Sleep(3 * time.Second)
			cur := versions(ctx, b)
			if changed(prev, cur) == 0 {
				break
			}
			prev = cur
		}
		before := versions(ctx, b)
		time.Sleep(steady)
		quietWrites := changed(before, versions(ctx, b))

		// Force a reconcile of every agent: a quota spec change enqueues all agents of the tenant.
		before = versions(ctx, b)
		for _, ns := range nss {
			tq := &agentraxv1alpha1.TenantQuota{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quota"}, tq); err != nil {
				b.Fatal(err)
			}
			tq.Spec.MaxGPUs++
			if err := env.Client.Update(ctx, tq); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(15 * time.Second)
		after := versions(ctx, b)
		for k := range after {
			if k[:3] == "tq/" { // our own spec updates (and the quotas' observedGeneration)
				delete(after, k)
			}
		}
		resyncWrites := changed(before, after)

		// Admission latency with the agents present, sequential, against a webhook-free baseline.
		var adLat, dryLat, cmLat []time.Duration
		for i := range probes {
			ns := nss[i%tenants]
			t0 := time.Now()
			if err := env.Client.Create(ctx, agent(ns, fmt.Sprintf("probe-%03d", i))); err != nil {
				b.Fatal(err)
			}
			adLat = append(adLat, time.Since(t0))
			t0 = time.Now()
			if err := env.Client.Create(ctx, agent(ns, fmt.Sprintf("dry-%03d", i)), client.DryRunAll); err != nil {
				b.Fatal(err)
			}
			dryLat = append(dryLat, time.Since(t0))
			t0 = time.Now()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("baseline-%03d", i)},
				Data: map[string]string{"image": "ghcr.io/org/agent:v1"}}
			if err := env.Client.Create(ctx, cm); err != nil {
				b.Fatal(err)
			}
			cmLat = append(cmLat, time.Since(t0))
		}

		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
		ratio := func(a, base time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(base)) }
		fmt.Printf("\nagentrax: %d AgentDeployments in %d tenants (%d concurrent creators)\n", agents, tenants, workers)
		fmt.Printf("%-48s %12s\n", "metric", "value")
		fmt.Printf("%-48s %12s\n", "all admitted (creates returned)", admitted.Round(time.Millisecond))
		fmt.Printf("%-48s %12s\n", "all children created (4 per agent)", children.Round(time.Millisecond))
		fmt.Printf("%-48s %12d\n", fmt.Sprintf("writes in a %s quiet window", steady), quietWrites)
		fmt.Printf("%-48s %12d\n", "agents/children rewritten after quota change", resyncWrites)
		fmt.Printf("%-48s %12s\n", "concurrent create p50 / p99", ms(quantile(createLat, .5))+" / "+ms(quantile(createLat, .99)))
		fmt.Printf("\nadmission with %d agents present (%d sequential creates each)\n", agents, probes)
		fmt.Printf("%-30s %10s %10s %10s %10s\n", "request", "p50", "p99", "p50 ratio", "p99 ratio")
		for _, row := range []struct {
			name string
			lat  []time.Duration
		}{{"ConfigMap create (baseline)", cmLat}, {"AgentDeployment create", adLat}, {"AgentDeployment dry-run", dryLat}} {
			fmt.Printf("%-30s %10s %10s %10s %10s\n", row.name, ms(quantile(row.lat, .5)), ms(quantile(row.lat, .99)),
				ratio(quantile(row.lat, .5), quantile(cmLat, .5)), ratio(quantile(row.lat, .99), quantile(cmLat, .99)))
		}
		b.ReportMetric(float64(children.Milliseconds()), "ms-children")
		b.ReportMetric(float64(quietWrites), "quiet-writes")
		b.ReportMetric(float64(quantile(adLat, .99).Microseconds())/1000, "ms-admission-p99")
	}
}
