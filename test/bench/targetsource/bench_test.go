// Package targetsource benchmarks the gnmic-targetsource controller against a real API server: the first sync of
// a large HTTP inventory compared with a bare server-side-apply loop at the same client QPS/burst, a second run
// with nothing changed, a run with 1% of the devices changed, and the heap of the manager running as a process
// of its own.
package targetsource

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// clientRate is the client QPS and burst of both the baseline and the manager: 1000/2000 by default, or
// TS_BENCH_QPS with twice that burst (TS_BENCH_QPS=50 is the manager's default --kube-api-qps, where the writes of a
// 10,000-device first sync take over three minutes and must still fit in one run).
func clientRate() (qps, burst int) {
	if n, err := strconv.Atoi(os.Getenv("TS_BENCH_QPS")); err == nil && n > 0 {
		return n, 2 * n
	}
	return 1000, 2000
}

type inventory struct {
	mu   sync.RWMutex
	body []byte
}

func (inv *inventory) set(n, changed int) {
	devices := make([]map[string]string, n)
	for i := range devices {
		ip := fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256)
		if i < changed {
			ip = fmt.Sprintf("172.16.%d.%d", (i/256)%256, i%256)
		}
		devices[i] = map[string]string{"hostname": fmt.Sprintf("dev%05d", i), "mgmt_ip": ip}
	}
	body, _ := json.Marshal(map[string]any{"results": devices})
	inv.mu.Lock()
	inv.body = body
	inv.mu.Unlock()
}

func (inv *inventory) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	_, _ = w.Write(inv.body)
}

func devicesFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("TS_BENCH_DEVICES")); err == nil && n > 0 {
		return n
	}
	return 10000
}

func BenchmarkTargetSource(b *testing.B) {
	ctx := context.Background()
	n := devicesFromEnv()
	qps, burst := clientRate()
	bin := buildManager(b, b.TempDir())
	// The control plane serves the Target webhook through a manager running only gnmic-targetprofile (which
	// reads Targets); the TargetSource controller runs in the operator binary, a process of its own.
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
	inv := &inventory{}
	inv.set(n, 0)
	srv, allow := inventoryServer(b, inv)
	defer srv.Close()

	for range b.N {
		// Baseline: server-side apply of the same Targets, same QPS/burst and the same 16 writes in flight.
		base := rest.CopyConfig(env.Config)
		base.QPS, base.Burst = float32(qps), burst
		baseClient, err := client.New(base, client.Options{Scheme: operator.NewScheme()})
		must(b, err)
		owner := baselineOwner(ctx, b, env.Client)
		cpu0 := takeCPU(ctx, b, env.Config, nil)
		start := time.Now()
		bareApply(ctx, b, baseClient, owner, n)
		baseline := time.Since(start)
		baseCPU := takeCPU(ctx, b, env.Config, nil).sub(cpu0)

		// The manager caches only the benchmark's namespace (the baseline's Targets stay out of its heap), and
		// its start-up (informer lists, cache sync) is left out of the measured first sync.
		mctx, cancel := context.WithCancel(ctx)
		mgr := startManager(mctx, b, bin, kubeconfig, "--controllers="+gnmic.TargetSourceControllerName, "--external-source-allow-cidrs="+allow.String(),
			"--watch-namespaces=controller", fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", burst))

		ts := &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: "controller", Name: "bench"},
			Spec: gnmicv1alpha1.TargetSourceSpec{
				Source: gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: srv.URL,
					Mapping: &gnmicv1alpha1.Mapping{Items: "self.results", Name: "item.hostname", Address: "item.mgmt_ip"}}},
				Target:     gnmicv1alpha1.TargetTemplate{Profile: "default"},
				MaxTargets: ptr.To[int32](0),
				// spec.timeout stays at its default (1m): it bounds the fetch only, the writes have a budget of
				// their own derived from the client QPS, and a failed run fails the benchmark (waitSync).
				Interval: &metav1.Duration{Duration: time.Hour},
			}}
		writes, cpu := targetWrites(ctx, b, env.Config), mgr.cpuSeconds(ctx, b)
		profiled := mgr.profile(mctx, b, os.Getenv("TS_BENCH_CPUPROFILE"))
		cpu0 = takeCPU(ctx, b, env.Config, mgr)
		start = time.Now()
		must(b, env.Client.Create(ctx, ts))
		first := waitSync(ctx, b, env.Client, nil, int32(n))
		firstDur := time.Since(start)
		firstWrites, firstCPU := targetWrites(ctx, b, env.Config)-writes, mgr.cpuSeconds(ctx, b)-cpu
		syncCPU := takeCPU(ctx, b, env.Config, mgr).sub(cpu0)
		<-profiled

		waitPast(first) // status times have one-second resolution
		writes, cpu = targetWrites(ctx, b, env.Config), mgr.cpuSeconds(ctx, b)
		start = time.Now()
		second := waitSync(ctx, b, env.Client, requestRun(ctx, b, env.Client, first), int32(n))
		secondDur := time.Since(start)
		secondWrites, secondCPU := targetWrites(ctx, b, env.Config)-writes, mgr.cpuSeconds(ctx, b)-cpu

		changed := n / 100
		inv.set(n, changed)
		waitPast(second)
		writes, cpu = targetWrites(ctx, b, env.Config), mgr.cpuSeconds(ctx, b)
		start = time.Now()
		waitSync(ctx, b, env.Client, requestRun(ctx, b, env.Client, second), int32(n))
		thirdDur := time.Since(start)
		thirdWrites, thirdCPU := targetWrites(ctx, b, env.Config)-writes, mgr.cpuSeconds(ctx, b)-cpu
		heap := mgr.figures()
		mgr.stop()
		cancel()
		sameTargets(ctx, b, env.Client, fmt.Sprintf("bench-dev%05d", n-1))

		ratio := firstDur.Seconds() / baseline.Seconds()
		fmt.Printf("\nTargetSource benchmark: %d devices, client QPS %d / burst %d\n", n, qps, burst)
		fmt.Printf("%-48s %12s %14s %8s %12s\n", "case", "time", "Target writes", "ratio", "manager CPU")
		fmt.Printf("%-48s %12s %14d %8s %12s\n", "baseline: bare SSA loop, same objects (16 in flight)", baseline.Round(time.Millisecond), n, "1.00", "-")
		fmt.Printf("%-48s %12s %14d %8.2f %11.2fs\n", "first sync to Ready (manager process)", firstDur.Round(time.Millisecond), firstWrites, ratio, firstCPU)
		fmt.Printf("%-48s %12s %14d %8s %11.2fs\n", "second run, inventory unchanged", secondDur.Round(time.Millisecond), secondWrites, "-", secondCPU)
		fmt.Printf("%-48s %12s %14d %8s %11.2fs\n", fmt.Sprintf("run with 1%% changed (%d devices)", changed), thirdDur.Round(time.Millisecond), thirdWrites, "-", thirdCPU)
		fmt.Printf("\n%s\n%s\n%s\n", cpuHeader(), baseCPU.row("baseline"), syncCPU.row("first sync"))
		fmt.Printf("\nManager process heap with %d Targets cached (target: peak heap <= 120 MiB)\n", n)
		fmt.Printf("%-48s %9d MiB\n", "peak heap (heap size at GC start, gctrace)", heap.gcPeakMiB)
		fmt.Printf("%-48s %9.1f MiB\n", "peak heap in use (sampled every second)", heap.heapInuseMiB)
		fmt.Printf("%-48s %9d MiB\n", "live heap after the last GC", heap.gcLiveMiB)
		fmt.Printf("%-48s %9.1f MiB\n", "peak resident set (sampled)", heap.rssMiB)
		fmt.Printf("%-48s %9d\n", "GC cycles", heap.gcCount)
		b.ReportMetric(ratio, "first/baseline")
		b.ReportMetric(float64(secondWrites), "writes-unchanged")
		b.ReportMetric(float64(thirdWrites), "writes-1pct")
		b.ReportMetric(float64(heap.gcPeakMiB), "peak-heap-MiB")
		if firstWrites != int64(n) || secondWrites != 0 || thirdWrites != int64(changed) {
			b.Errorf("want %d writes first, 0 unchanged and %d with 1%% changed, got %d, %d and %d",
				n, changed, firstWrites, secondWrites, thirdWrites)
		}
		if heap.gcCount == 0 {
			b.Error("no GC trace read from the manager process")
		}
	}
}

// waitPast returns once the wall clock is in the second after t, so the next run's lastSyncTime differs.
func waitPast(t *metav1.Time) {
	if d := time.Until(t.Add(time.Second)); d > 0 {
		time.Sleep(d)
	}
}

// baselineOwner creates the TargetSource the baseline's Targets name as their controller owner: suspended, in a
// namespace the manager process does not watch, so nothing reconciles it.
func baselineOwner(ctx context.Context, b *testing.B, c client.Client) *gnmicv1alpha1.TargetSource {
	ts := &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: "baseline", Name: "bench"},
		Spec: gnmicv1alpha1.TargetSourceSpec{
			Source: gnmicv1alpha1.InventorySource{Type: "Static", Static: &gnmicv1alpha1.StaticSource{
				Devices: []gnmicv1alpha1.StaticDevice{{Name: "unused", Address: "192.0.2.1"}}}},
			Target:  gnmicv1alpha1.TargetTemplate{Profile: "default"},
			Suspend: true,
		}}
	must(b, c.Create(ctx, ts))
	return ts
}

// bareApply server-side applies, with 16 writes in flight, the objects the controller applies for the same
// devices: spec.address and spec.profile, the two reserved labels, the discovered-name and source-labels
// annotations and the controller owner reference, under the same field manager with force. sameTargets checks
// after the run that both sides wrote the same shape.
func bareApply(ctx context.Context, b *testing.B, c client.Client, owner *gnmicv1alpha1.TargetSource, n int) {
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := range work {
				device := fmt.Sprintf("dev%05d", i)
				u := &unstructured.Unstructured{Object: map[string]any{
					"spec": map[string]any{"address": fmt.Sprintf("10.%d.%d.%d:57400", i/65536, (i/256)%256, i%256), "profile": "default"}}}
				u.SetAPIVersion(gnmicv1alpha1.GroupVersion.String())
				u.SetKind("Target")
				u.SetNamespace(owner.Namespace)
				u.SetName(owner.Name + "-" + device)
				u.SetLabels(map[string]string{gnmicv1alpha1.LabelTargetSource: owner.Name, gnmicv1alpha1.LabelManagedBy: gnmicv1alpha1.ManagedByTargetSource})
				u.SetAnnotations(map[string]string{gnmicv1alpha1.AnnotationDiscoveredName: device, gnmicv1alpha1.AnnotationSourceLabels: ""})
				u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: gnmicv1alpha1.GroupVersion.String(), Kind: "TargetSource",
					Name: owner.Name, UID: owner.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
				err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(gnmic.FieldManager(owner.Name)), client.ForceOwnership)
				if err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d baseline applies failed", failed.Load())
	}
}

// sameTargets fails the benchmark unless the baseline's Target name and the controller's have the same spec,
// labels, annotation keys, owner reference shape and field manager: the comparison is only fair between equal
// writes.
func sameTargets(ctx context.Context, b *testing.B, c client.Client, name string) {
	shape := func(ns string) string {
		t := &gnmicv1alpha1.Target{}
		must(b, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, t))
		var keys []string
		for k := range t.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var refs []string
		for _, r := range t.OwnerReferences {
			refs = append(refs, fmt.Sprintf("%s/%s %s controller=%v block=%v", r.APIVersion, r.Kind, r.Name, *r.Controller, *r.BlockOwnerDeletion))
		}
		var managers []string
		for _, m := range t.ManagedFields {
			managers = append(managers, m.Manager+" "+string(m.Operation))
		}
		return fmt.Sprintf("spec=%+v labels=%v annotations=%v discovered=%s owners=%v managers=%v", t.Spec, t.Labels, keys,
			t.Annotations[gnmicv1alpha1.AnnotationDiscoveredName], refs, managers)
	}
	if base, ctrl := shape("baseline"), shape("controller"); base != ctrl {
		b.Errorf("the baseline wrote different Targets from the controller:\nbaseline:   %s\ncontroller: %s", base, ctrl)
	}
}

// requestRun sets a new requested-at annotation and returns the lastSyncTime to wait past.
func requestRun(ctx context.Context, b *testing.B, c client.Client, after *metav1.Time) *metav1.Time {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gnmicv1alpha1.AnnotationRequestedAt, time.Now().Format(time.RFC3339Nano))
	ts := &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: "controller", Name: "bench"}}
	must(b, c.Patch(ctx, ts, client.RawPatch(types.MergePatchType, []byte(patch))))
	return after
}

// waitSync polls until a run that ended after `after` is Ready with `managed` Targets, and returns its time.
func waitSync(ctx context.Context, b *testing.B, c client.Client, after *metav1.Time, managed int32) *metav1.Time {
	return waitSyncOf(ctx, b, c, "bench", after, managed)
}

// waitSyncOf waits for a run of the TargetSource controller/<name> after the given time to end Ready with the given
// number of managed Targets; a failed run fails the benchmark.
func waitSyncOf(ctx context.Context, b *testing.B, c client.Client, name string, after *metav1.Time, managed int32) *metav1.Time {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		ts := &gnmicv1alpha1.TargetSource{}
		must(b, c.Get(ctx, types.NamespacedName{Namespace: "controller", Name: name}, ts))
		st := ts.Status
		if st.LastSyncTime != nil && (after == nil || st.LastSyncTime.After(after.Time)) {
			if meta.IsStatusConditionTrue(st.Conditions, gnmicv1alpha1.TargetSourceConditionReady) && st.Managed == managed {
				return st.LastSyncTime
			}
			if c := meta.FindStatusCondition(st.Conditions, gnmicv1alpha1.TargetSourceConditionReady); c != nil && c.Status == metav1.ConditionFalse {
				b.Fatalf("run failed: %s: %s", c.Reason, c.Message)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("no sync within 30 minutes")
	return nil
}

// dropTargetSourceWebhook removes the TargetSource admission webhook, which this control plane does not serve
// (the benchmark measures the controller, not admission).
func dropTargetSourceWebhook(ctx context.Context, b *testing.B, c client.Client) {
	list := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	must(b, c.List(ctx, list))
	for i := range list.Items {
		cfg := &list.Items[i]
		kept := cfg.Webhooks[:0]
		for _, w := range cfg.Webhooks {
			if !strings.HasPrefix(w.Name, "vtargetsource") {
				kept = append(kept, w)
			}
		}
		cfg.Webhooks = kept
		must(b, c.Update(ctx, cfg))
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// inventoryServer serves inv on the host's first non-loopback, non-link-local IPv4 address: the operator's SSRF
// guard never lets an inventory fetch reach loopback, and the exemption returned (for
// --external-source-allow-cidrs) names that one address.
func inventoryServer(b *testing.B, inv http.Handler) (*httptest.Server, netip.Prefix) {
	addrs, err := net.InterfaceAddrs()
	must(b, err)
	for _, a := range addrs {
		ipNet, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipNet.IP.To4())
		if !ok || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		must(b, err)
		srv := httptest.NewUnstartedServer(inv)
		srv.Listener = ln
		srv.Start()
		return srv, netip.PrefixFrom(ip, 32)
	}
	b.Fatal("the benchmark's inventory needs a non-loopback IPv4 address (the SSRF guard never allows loopback)")
	return nil, netip.Prefix{}
}
