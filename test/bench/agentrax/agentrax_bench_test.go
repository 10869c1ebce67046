// Package agentrax benchmarks the agentrax group against a real API server: 500 AgentDeployments in 5 tenants.
// It prints a table; the results are recorded in docs/performance.md.
package agentrax

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	agentraxwebhook "github.com/quartet-dev/quartet-operator/internal/webhook/agentrax"
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

// quantile is the sample at rank q of d (0 when d is empty): one function for every row, so the webhook's answer
// times and the bare compare-and-swap are reduced alike.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkAgentrax500 creates QUARTET_BENCH_AGENTS (500) AgentDeployments in 5 tenants through the webhooks
// with 16 concurrent creators, waits for every child, counts every write (watches on all agentrax kinds and
// children) during a quiet window of QUARTET_BENCH_STEADY_SECONDS (120), forces a reconcile of every agent by
// changing each quota's spec and counts writes again, then measures admission latency with the agents present
// against baselines from the same run: a ConfigMap create (no webhook), an AgentDeployment label update (both
// webhooks, no quota ledger) and a bare compare-and-swap write of the same TenantQuota. It fails when the
// validating webhook's own p99 answer time for a create exceeds maxCASRatio times the bare write's p99.
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
				Spec: agentraxv1alpha1.TenantQuotaSpec{MaxAgents: int32(agents) + 2*probes, MaxGPUs: 10000, MaxTotalReplicas: 10000, MaxReplicasPerAgent: 10}}
			if err := env.Client.Create(ctx, tq); err != nil {
				b.Fatal(err)
			}
		}
		writes := watchWrites(b)

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
		progress("%d creates returned after %s", agents, admitted)
		sel := client.MatchingLabels{agentraxv1alpha1.LabelAgent: "true"}
		var children time.Duration
		for children == 0 {
			n := map[string]int{}
			for _, kind := range []string{"Deployment", "Service", "HorizontalPodAutoscaler", "PodMonitor"} {
				n[kind] = countChildren(ctx, b, kind, sel)
			}
			switch {
			case n["Deployment"] >= agents && n["Service"] >= agents && n["HorizontalPodAutoscaler"] >= agents && n["PodMonitor"] >= agents:
				children = time.Since(start)
			case time.Since(start) > 20*time.Minute:
				b.Fatalf("children not created after 20m: %v", n)
			default:
				progress("children so far: %v", n)
				writes.countFor(time.Second) // poll once a second; listing 2,000 objects is not free either
			}
		}

		// Let status settle (5 s without any write), then count every write in the quiet window.
		progress("all children after %s; waiting for 5 s without writes", children)
		writes.waitQuiet(b, 5*time.Second, 5*time.Minute)
		progress("quiet; counting writes for %s", steady)
		quiet := writes.countFor(steady)
		progress("quiet window: %v; changing every quota's spec", quiet)

		// Force a reconcile of every agent: a quota spec change enqueues all agents of the tenant.
		before := reconciles(b, agentrax.AgentDeploymentControllerName)
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
		resync := map[string]int{}
		resyncStart := time.Now()
		for reconciles(b, agentrax.AgentDeploymentControllerName) < before+uint64(agents) {
			if time.Since(resyncStart) > 5*time.Minute {
				b.Fatalf("only %d of %d agents reconciled 5 minutes after the quota change",
					reconciles(b, agentrax.AgentDeploymentControllerName)-before, agents)
			}
			resync = addCounts(resync, writes.countFor(200*time.Millisecond))
		}
		progress("every agent reconciled %s after the quota change", time.Since(resyncStart))
		resync = addCounts(resync, writes.countFor(3*time.Second)) // anything the last reconciles caused
		writes.stop()

		// Admission probes twice: back to back (each request waits for the previous one; the controllers'
		// work for every probe agent runs alongside), then paced at one round per probeInterval.
		closed := runProbes(ctx, b, nss, agents, probes, 0, "probe")
		paced := runProbes(ctx, b, nss, agents, probes, probeInterval, "paced")
		progress("admission probes done")

		fmt.Printf("\nagentrax: %d AgentDeployments in %d tenants (%d concurrent creators)\n", agents, tenants, workers)
		fmt.Printf("%-52s %14s\n", "metric", "value")
		fmt.Printf("%-52s %14s\n", "all admitted (creates returned)", admitted.Round(time.Millisecond))
		fmt.Printf("%-52s %14s\n", "all children created (4 per agent)", children.Round(time.Millisecond))
		fmt.Printf("%-52s %14d\n", fmt.Sprintf("writes in a %s quiet window", steady), total(quiet))
		fmt.Printf("%-52s %14d\n", "writes after quota spec change (all kinds but TQ)", total(resync, "TenantQuota"))
		fmt.Printf("%-52s %14s\n", "concurrent create p50 / p99", ms(quantile(createLat, .5))+" / "+ms(quantile(createLat, .99)))
		fmt.Printf("quiet-window writes by kind: %s; after the quota change: %s\n", describe(quiet), describe(resync))
		closed.print(fmt.Sprintf("back to back: %d rounds, each request waiting for the previous one", probes), agents)
		paced.print(fmt.Sprintf("paced: %d rounds, one round (6 requests, 1 new agent) every %s", probes, probeInterval), agents)
		closedHook, closedCAS := closed.p99s()
		pacedHook, pacedCAS := paced.p99s()
		b.ReportMetric(float64(closedHook.Microseconds())/1000, "ms-validating-create-p99")
		b.ReportMetric(float64(closedCAS.Microseconds())/1000, "ms-cas-p99")
		b.ReportMetric(float64(pacedHook.Microseconds())/1000, "ms-validating-create-paced-p99")
		b.ReportMetric(float64(pacedCAS.Microseconds())/1000, "ms-cas-paced-p99")
		b.ReportMetric(closed.casRatio(), "webhook-to-cas-p99-ratio")
		b.ReportMetric(paced.casRatio(), "webhook-to-cas-p99-ratio-paced")
		b.ReportMetric(float64(children.Milliseconds()), "ms-children")
		b.ReportMetric(float64(total(quiet)), "quiet-writes")
		closed.checkCASRatio(b, "back to back")
		paced.checkCASRatio(b, "paced")
	}
}

// progress goes to stderr at once (run the compiled test binary to see it live; go test buffers it).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "# %s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
}

func addCounts(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}

type latencies struct {
	name string
	lat  []time.Duration
}

// probeAdmission times sequential requests, round robin over the tenants: the ConfigMap create baseline first.
func probeAdmission(ctx context.Context, b *testing.B, nss []string, agents, probes int, interval time.Duration, prefix string) []latencies {
	b.Helper()
	rows := []latencies{{name: "ConfigMap create (baseline, no webhook)"}, {name: "AgentDeployment label update (webhooks only)"},
		{name: "AgentDeployment create (webhooks + ledger)"}, {name: "AgentDeployment dry-run create"},
		{name: "TenantQuota label patch (ledger object, no webhook)"},
		{name: "TenantQuota compare-and-swap (JSON patch, tests)"}}
	// Timed by the function that times the webhooks' handlers, so the rows and the webhooks' answer times are
	// measured alike.
	timed := func(row int, f func() error) {
		var err error
		d := agentraxwebhook.Timed(func() { err = f() })
		if err != nil {
			b.Fatal(err)
		}
		rows[row].lat = append(rows[row].lat, d)
	}
	// Paced: a round starts on each tick of its schedule, not when the previous one ended (a late round's tick
	// is taken at once, as a ticker drops the ticks it could not deliver).
	var tick <-chan time.Time
	if interval > 0 {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	// The bare compare-and-swap baseline tests the same preconditions the webhook's ledger write tests (the
	// object's identity and spec generation), on the same TenantQuota, and changes one label: a real write. It
	// goes through a client built as the webhook's own (no client-side rate limit), in this process.
	cas, err := agentraxwebhook.QuotaClient(env.Manager)
	if err != nil {
		b.Fatal(err)
	}
	quotas := map[string]*agentraxv1alpha1.TenantQuota{}
	for _, ns := range nss {
		tq := &agentraxv1alpha1.TenantQuota{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quota"}, tq); err != nil {
			b.Fatal(err)
		}
		quotas[ns] = tq
	}
	for i := range probes {
		if tick != nil && i > 0 {
			<-tick
		}
		ns := nss[i%len(nss)]
		timed(0, func() error {
			return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-baseline-%03d", prefix, i)},
				Data: map[string]string{"image": "ghcr.io/org/agent:v1"}})
		})
		j := i % agents // agent-j was created in tenant j % len(nss)
		existing := &agentraxv1alpha1.AgentDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: nss[j%len(nss)], Name: fmt.Sprintf("agent-%03d", j)}}
		timed(1, func() error {
			patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"bench-probe":"%s-%d"}}}`, prefix, i))
			return env.Client.Patch(ctx, existing, client.RawPatch(types.MergePatchType, patch))
		})
		timed(2, func() error { return env.Client.Create(ctx, agent(ns, fmt.Sprintf("%s-%03d", prefix, i))) })
		timed(3, func() error {
			return env.Client.Create(ctx, agent(ns, fmt.Sprintf("%s-dry-%03d", prefix, i)), client.DryRunAll)
		})
		// What writing the object that holds the tenant's ledger costs, without any webhook.
		timed(4, func() error {
			tq := &agentraxv1alpha1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}}
			patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"bench-probe":"%s-%d"}}}`, prefix, i))
			return env.Client.Patch(ctx, tq, client.RawPatch(types.MergePatchType, patch))
		})
		timed(5, func() error {
			tq := quotas[ns]
			patch := []byte(fmt.Sprintf(`[{"op":"test","path":"/metadata/uid","value":%q},`+
				`{"op":"test","path":"/metadata/generation","value":%d},`+
				`{"op":"add","path":"/metadata/labels/bench-cas","value":"%s-%d"}]`, tq.UID, tq.Generation, prefix, i))
			return cas.Patch(ctx, tq.DeepCopy(), client.RawPatch(types.JSONPatchType, patch))
		})
	}
	return rows
}
