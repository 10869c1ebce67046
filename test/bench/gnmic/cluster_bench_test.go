// Package gnmic benchmarks the gnmic-cluster controller against three collector test servers on loopback:
// 1,000 Targets, the time from Pipeline creation until every collector holds its plan, the applies a no-op
// reconcile sends (want 0) and the applies one new Target causes (want exactly 1, to exactly 1 collector). The
// baseline, measured in the same run, is pushing the same three plans straight to the collectors. A second
// benchmark (podloss_bench_test.go) measures how long a lost collector pod's targets go uncollected.
package gnmic

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gnmictypes "github.com/openconfig/gnmic/pkg/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

var env *testenv.Env

// dialMap sends the operator's connections to each bench Cluster's pods to its collector test servers.
var dialMap = &devdial.Map{}

func TestMain(m *testing.M) {
	// Cluster mode: the StatefulSet controller and the simulated kubelet make the collector pods Ready;
	// CrashLoopStage lets the pod-loss benchmark make one unready by labelling it.
	os.Exit(testenv.Main(m, &env, testenv.Options{Controllers: []string{gnmic.ClusterControllerName},
		Cluster: &testenv.ClusterOptions{ExtraStages: []byte(testenv.CrashLoopStage)},
		Manager: func(o *manager.Options) { o.DevDialMap = dialMap }}))
}

const targets = 1000

func BenchmarkClusterPush1000Targets(b *testing.B) {
	g := NewWithT(b)
	g.SetDefaultEventuallyTimeout(5 * time.Minute)
	ctx := context.Background()
	for n := range b.N {
		ns := fmt.Sprintf("bench-%d", n)
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var servers []*gnmicserver.Server
		for range 3 {
			s, err := gnmicserver.Start("127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = s.Close() }()
			servers = append(servers, s)
		}
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ifaces"},
			Spec: gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/interfaces"}}})).To(Succeed())
		// A Pipeline without an output collects nothing, so the bench writes to a file output.
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Output{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sink"},
			Spec: gnmicv1alpha1.OutputSpec{Type: gnmicv1alpha1.OutputFile}})).To(Succeed())
		createTargets(g, ns, 0, targets)
		replicas := int32(3)
		g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "bench", 0, servers))).To(Succeed())
		c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
			Spec: gnmicv1alpha1.ClusterSpec{Image: "gnmic", Replicas: &replicas, API: &gnmicv1alpha1.ClusterAPI{PlainHTTP: true}}}
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		g.Eventually(func() int { return total(servers) }).Should(Equal(3)) // the empty plans

		// Baseline: the same three plans pushed straight to the collectors.
		baseline := directPush(g, servers)

		start := time.Now()
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"},
			Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "bench", Enabled: true, SubscriptionRefs: []string{"ifaces"},
				Outputs:         gnmicv1alpha1.PipelineOutputs{OutputRefs: []string{"sink"}},
				TargetSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"bench": "yes"}}}}})).To(Succeed())
		g.Eventually(func() int { return held(servers) }).WithPolling(10 * time.Millisecond).Should(Equal(targets))
		pushed := time.Since(start)
		g.Eventually(func(g Gomega) {
			list := &gnmicv1alpha1.TargetList{}
			g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			for _, t := range list.Items {
				g.Expect(t.Status.ClusterStates).To(HaveKey("bench"))
			}
		}).WithPolling(100 * time.Millisecond).Should(Succeed())
		statuses := time.Since(start)
		time.Sleep(2 * time.Second) // let health follow-up settle before counting
		settled := counts(servers)

		// No-op reconcile: an annotation change triggers a reconcile that has nothing to push.
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.SetAnnotations(map[string]string{"bench/touched": "yes"})
		g.Expect(env.Client.Update(ctx, c)).To(Succeed())
		g.Consistently(func() []int { return counts(servers) }).WithTimeout(2 * time.Second).Should(Equal(settled))
		noop := total(servers) - sum(settled)

		// One new Target: exactly one apply, to exactly one collector.
		createTargets(g, ns, targets, 1)
		g.Eventually(func() int { return held(servers) }).Should(Equal(targets + 1))
		g.Consistently(func() int { return total(servers) }).WithTimeout(2 * time.Second).Should(Equal(sum(settled) + 1))
		after := counts(servers)
		changed := 0
		for i := range after {
			if after[i] != settled[i] {
				changed++
			}
		}

		fmt.Printf("\n%-58s %14s %10s\n", "gnmic-cluster, 1,000 Targets, 3 collectors", "value", "ratio")
		fmt.Printf("%-58s %14s %10s\n", "baseline: 3 plans POSTed straight to the collectors", baseline.Round(time.Millisecond), "1.0x")
		fmt.Printf("%-58s %14s %9.1fx\n", "Pipeline created -> every collector holds its plan", pushed.Round(time.Millisecond), float64(pushed)/float64(baseline))
		fmt.Printf("%-58s %14s %9.1fx\n", "Pipeline created -> every Target status names its pod", statuses.Round(time.Millisecond), float64(statuses)/float64(baseline))
		fmt.Printf("%-58s %14d %10s\n", "applies sent by a no-op reconcile", noop, "")
		fmt.Printf("%-58s %14d %10s\n", "applies sent for one new Target", total(servers)-sum(settled), "")
		fmt.Printf("%-58s %14d %10s\n", "collectors that received them", changed, "")
		b.ReportMetric(float64(pushed.Milliseconds()), "ms-to-push")
		b.ReportMetric(float64(noop), "noop-applies")
		g.Expect(noop).To(BeZero())
		g.Expect(changed).To(Equal(1))
	}
}

func createTargets(g Gomega, ns string, from, n int) {
	ctx := context.Background()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := &gnmicv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%05d", i), Labels: map[string]string{"bench": "yes"}},
					Spec: gnmicv1alpha1.TargetSpec{Address: fmt.Sprintf("10.%d.%d.%d:57400", i/65536, i/256%256, i%256), Profile: "default"}}
				g.Expect(env.Client.Create(ctx, t)).To(Succeed())
			}
		}()
	}
	for i := from; i < from+n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// directPush applies a 1,000-target plan split three ways straight to the servers, then empties them again.
func directPush(g Gomega, servers []*gnmicserver.Server) time.Duration {
	c := &collector.Client{}
	var names []string
	for i := range targets {
		names = append(names, fmt.Sprintf("x/r%05d", i))
	}
	start := time.Now()
	for i, s := range servers {
		req := plan.Empty()
		for j, n := range names {
			if j%3 == i {
				req.Targets[n] = &gnmictypes.TargetConfig{Name: n, Address: "192.0.2.1:57400", Subscriptions: []string{"x/ifaces"}}
			}
		}
		req.Subscriptions["x/ifaces"] = &gnmictypes.SubscriptionConfig{Name: "x/ifaces", Paths: []string{"/interfaces"}, Mode: "stream"}
		body, _, err := plan.Encode(req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Apply(context.Background(), s.URL(), body)).To(Succeed())
	}
	elapsed := time.Since(start)
	for _, s := range servers {
		body, _, _ := plan.Encode(plan.Empty())
		g.Expect(c.Apply(context.Background(), s.URL(), body)).To(Succeed())
	}
	return elapsed
}

func held(servers []*gnmicserver.Server) int {
	seen := map[string]bool{}
	for _, s := range servers {
		for _, n := range s.TargetNames() {
			seen[n] = true
		}
	}
	return len(slices.Collect(maps.Keys(seen)))
}

func counts(servers []*gnmicserver.Server) []int {
	out := make([]int, len(servers))
	for i, s := range servers {
		out[i] = s.ApplyCount()
	}
	return out
}

func total(servers []*gnmicserver.Server) int { return sum(counts(servers)) }

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
