package targetsource

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// sources is how many TargetSources sync at once in BenchmarkTargetSourceConcurrent: the manager's default
// --targetsource-concurrency.
const sources = 4

// BenchmarkTargetSourceConcurrent splits the devices (TS_BENCH_DEVICES, default 10,000) over four inventories
// whose TargetSources are created together, so their first syncs share the one writer and its rate limiter
// (TS_BENCH_QPS). The baseline is the bare apply loop writing the same number of Targets at the same QPS. Every
// run must end Ready (a write budget sized as if each run had the whole QPS made them time out).
func BenchmarkTargetSourceConcurrent(b *testing.B) {
	ctx := context.Background()
	n := devicesFromEnv()
	per := n / sources
	n = per * sources
	qps, burst := clientRate()
	bin := buildManager(b, b.TempDir())
	env, err := testenv.Start(testenv.Options{Controllers: []string{gnmic.TargetProfileControllerName}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	dropTargetSourceWebhook(ctx, b, env.Client)
	for _, ns := range []string{"baseline", "controller"} {
		must(b, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	kubeconfig, err := env.AddAdminKubeconfig("bench-manager")
	must(b, err)
	mux := http.NewServeMux()
	for i := range sources {
		inv := &inventory{}
		inv.set(per, 0)
		mux.Handle(fmt.Sprintf("/s%d", i), inv)
	}
	srv, allow := inventoryServer(b, mux)
	defer srv.Close()

	for range b.N {
		base := rest.CopyConfig(env.Config)
		base.QPS, base.Burst = float32(qps), burst
		baseClient, err := client.New(base, client.Options{Scheme: operator.NewScheme()})
		must(b, err)
		owner := baselineOwner(ctx, b, env.Client)
		start := time.Now()
		bareApply(ctx, b, baseClient, owner, n)
		baseline := time.Since(start)

		mctx, cancel := context.WithCancel(ctx)
		mgr := startManager(mctx, b, bin, kubeconfig, "--controllers="+gnmic.TargetSourceControllerName, "--external-source-allow-cidrs="+allow.String(),
			"--watch-namespaces=controller", fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", burst),
			fmt.Sprintf("--targetsource-concurrency=%d", sources))
		writes := targetWrites(ctx, b, env.Config)
		start = time.Now()
		for i := range sources {
			must(b, env.Client.Create(ctx, &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: "controller", Name: fmt.Sprintf("src%d", i)},
				Spec: gnmicv1alpha1.TargetSourceSpec{
					Source: gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: fmt.Sprintf("%s/s%d", srv.URL, i),
						Mapping: &gnmicv1alpha1.Mapping{Items: "self.results", Name: "item.hostname", Address: "item.mgmt_ip"}}},
					Target:     gnmicv1alpha1.TargetTemplate{Profile: "default"},
					MaxTargets: ptr.To[int32](0),
					Interval:   &metav1.Duration{Duration: time.Hour},
				}}))
		}
		// Waited for in turn from this goroutine (a failed run fails the benchmark): each end time is when its wait
		// returned, an upper bound once an earlier source took longer.
		ends := make([]time.Duration, sources)
		for i := range sources {
			waitSyncOf(ctx, b, env.Client, fmt.Sprintf("src%d", i), nil, int32(per))
			ends[i] = time.Since(start)
		}
		all := time.Since(start)
		total := targetWrites(ctx, b, env.Config) - writes
		mgr.stop()
		cancel()

		ratio := all.Seconds() / baseline.Seconds()
		fmt.Printf("\nTargetSource benchmark, %d sources at once: %d devices (%d each), client QPS %d / burst %d\n", sources, n, per, qps, burst)
		fmt.Printf("%-48s %12s %14s %8s\n", "case", "time", "Target writes", "ratio")
		fmt.Printf("%-48s %12s %14d %8s\n", "baseline: bare SSA loop, same objects (16 in flight)", baseline.Round(time.Millisecond), n, "1.00")
		fmt.Printf("%-48s %12s %14d %8.2f\n", fmt.Sprintf("%d first syncs, all Ready (manager process)", sources), all.Round(time.Millisecond), total, ratio)
		for i, d := range ends {
			fmt.Printf("  src%d Ready after %s\n", i, d.Round(time.Millisecond))
		}
		b.ReportMetric(ratio, "all/baseline")
		if total != int64(n) {
			b.Errorf("want %d Target writes, got %d", n, total)
		}
	}
}
