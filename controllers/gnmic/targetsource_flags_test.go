package gnmic_test

import (
	"context"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/manager"
)

// The package's manager runs with the production default of --targetsource-concurrency (4): six TargetSources
// whose inventory answers only when released are fetched four at a time.
func TestTargetSourceConcurrencyDefault(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(`{"results":[{"hostname":"r1","mgmt_ip":"10.0.0.1"}]}`))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	sources := []string{"c1", "c2", "c3", "c4", "c5", "c6"}
	for _, name := range sources {
		g.Expect(env.Client.Create(ctx, httpSource(ns, name, srv.URL))).To(Succeed())
	}
	current := func() int { mu.Lock(); defer mu.Unlock(); return inFlight }
	g.Eventually(current).Should(Equal(4))
	g.Consistently(current, time.Second).Should(BeNumerically("<=", 4))
	close(release)
	for _, name := range sources {
		waitReason(t, ns, name, gnmicv1alpha1.ReasonSucceeded)
	}
	mu.Lock()
	defer mu.Unlock()
	g.Expect(peak).To(Equal(4))
}

// A manager built from the command line flags --watch-namespaces and --api-bind-address caches only the
// watched namespace and serves the refresh API on the address, for TargetSources of that namespace only.
func TestManagerFlagsWatchNamespacesAndAPIBindAddress(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	watched, other := newNamespace(t), newNamespace(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	apiAddr := ln.Addr().String()
	g.Expect(ln.Close()).To(Succeed())

	o := manager.DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--controllers=" + gnmic.TargetSourceControllerName, "--watch-namespaces=" + watched,
		"--api-bind-address=" + apiAddr, "--targetsource-concurrency=2",
		"--enable-webhooks=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
	})).To(Succeed())
	g.Expect(o.TargetSourceConcurrency).To(Equal(2))
	o.SkipControllerNameValidation = true // the package's manager runs the same controller
	mctx, cancel := context.WithCancel(ctx)
	mgr, err := manager.New(mctx, env.Config, o)
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); g.Expect(<-done).To(Succeed()) })
	g.Expect(mgr.GetCache().WaitForCacheSync(mctx)).To(BeTrue())
	// The flag reaches the controller: controller-runtime reports its worker count when it starts (a gauge per
	// controller name, shared with the package's manager, which set it to 4 earlier).
	g.Eventually(func(g Gomega) {
		families, err := metrics.Registry.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		workers := -1.0
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "controller_runtime_max_concurrent_reconciles" && label(m, "controller") == gnmic.TargetSourceControllerName {
					workers = m.GetGauge().GetValue()
				}
			}
		}
		g.Expect(workers).To(Equal(2.0))
	}).Should(Succeed())

	// Suspended TargetSources with the refresh webhook: neither manager runs them, both may serve refreshes.
	for _, ns := range []string{watched, other} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
			StringData: map[string]string{"token": "s3cret"}})).To(Succeed())
		ts := staticSource(ns, "inv", dev("r1", "10.0.0.1"))
		ts.Spec.Suspend = true
		ts.Spec.Webhook = &gnmicv1alpha1.RefreshWebhook{Enabled: true, Auth: &gnmicv1alpha1.RefreshAuth{
			Bearer: &gnmicv1alpha1.BearerAuth{SecretRef: gnmicv1alpha1.SecretKeyRef{Name: "hook", Key: "token"}}}}
		g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		list := &gnmicv1alpha1.TargetSourceList{}
		g.Expect(mgr.GetCache().List(ctx, list, client.InNamespace(watched))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
	}).Should(Succeed())
	err = mgr.GetCache().List(ctx, &gnmicv1alpha1.TargetSourceList{}, client.InNamespace(other))
	g.Expect(err).To(HaveOccurred(), "the cache holds only the watched namespace")

	refresh := func(ns string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/api/v1/namespaces/"+ns+"/targetsources/inv/refresh",
			strings.NewReader("{}"))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	g.Eventually(func() int { return refresh(watched) }).Should(Equal(http.StatusAccepted))
	g.Expect(getTS(g, watched, "inv").Annotations).To(HaveKey(gnmicv1alpha1.AnnotationRequestedAt))
	g.Expect(refresh(other)).To(Equal(http.StatusUnauthorized), "a namespace this replica does not watch: refused like a missing TargetSource")
	g.Expect(getTS(g, other, "inv").Annotations).NotTo(HaveKey(gnmicv1alpha1.AnnotationRequestedAt))
}
