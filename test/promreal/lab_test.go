// Package promreal runs the canary analysis against a real Prometheus (Debian's `prometheus` package; see
// hack/ensure-prometheus.sh) scraping small HTTP servers started by the tests. Each server plays one variant of
// an agent and exposes http_requests_total{code} and the http_request_duration_seconds histogram; the tests
// control its request rate, error share and latency, and the labels Prometheus attaches to the scrape are the
// ones a PodMonitor gives agent pods (namespace, app_kubernetes_io_name, agentrax_io_variant).
package promreal

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quartet-dev/quartet-operator/internal/rollout"
)

const namespace = "team-a"

// prometheusBinary finds Prometheus; without it the test fails under CI=true and is skipped otherwise, naming
// the script that installs it.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMETHEUS_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("prometheus is not installed: run hack/ensure-prometheus.sh")
	}
	t.Skip("prometheus is not installed: run hack/ensure-prometheus.sh (CI=true makes this a failure)")
	return ""
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// app is one variant of an agent: its own registry, served on a loopback port.
type app struct {
	name, variant string
	addr          string

	mu        sync.Mutex
	errShare  float64
	latency   float64 // seconds
	pending   float64 // fractional requests not served yet
	errCredit float64
	requests  *prometheus.CounterVec
	durations prometheus.Histogram
}

func newApp(t *testing.T, name, variant string) *app {
	a := &app{name: name, variant: variant, latency: 0.08, errShare: 0.05,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total",
			Help: "Requests served."}, []string{"code"}),
		durations: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "http_request_duration_seconds",
			Help: "Request latency.", Buckets: []float64{0.05, 0.1, 0.2, 0.5, 1}})}
	// Both codes exported from the start: increase() cannot count the first increment of a series it has not
	// seen at zero, which would hide the first error.
	a.requests.WithLabelValues("200")
	a.requests.WithLabelValues("500")
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.requests, a.durations)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	a.addr = srv.Listener.Addr().String()
	return a
}

// set changes the share of 5xx responses and the latency of the requests served from now on.
func (a *app) set(errShare, latency float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errShare, a.latency = errShare, latency
}

// serve records n requests (fractions carry over), spreading errors evenly so the error share is exact.
func (a *app) serve(n float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending += n
	for ; a.pending >= 1; a.pending-- {
		a.errCredit += a.errShare
		code := "200"
		if a.errCredit >= 1 {
			a.errCredit--
			code = "500"
		}
		a.requests.WithLabelValues(code).Inc()
		a.durations.Observe(a.latency)
	}
}

func (a *app) target() rollout.Target {
	return rollout.Target{Namespace: namespace, Name: a.name, Variant: a.variant}
}

// traffic sends rps requests per second to an agent, split between stable and canary by the canary weight the
// route last accepted, until the test ends.
type traffic struct {
	mu     sync.Mutex
	rps    float64
	weight int32
}

func (tr *traffic) set(rps float64, weight int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if rps >= 0 {
		tr.rps = rps
	}
	if weight >= 0 {
		tr.weight = weight
	}
}

func startTraffic(t *testing.T, rps float64, stable, canary *app) *traffic {
	tr := &traffic{rps: rps}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				tr.mu.Lock()
				n, w := tr.rps/20, float64(tr.weight)/100
				tr.mu.Unlock()
				stable.serve(n * (1 - w))
				if canary != nil {
					canary.serve(n * w)
				}
			}
		}
	}()
	return tr
}

// promServer is a Prometheus process scraping the apps every second.
type promServer struct {
	url  string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func startPrometheus(t *testing.T, apps ...*app) *promServer {
	t.Helper()
	g := NewWithT(t)
	bin := prometheusBinary(t)
	dir := t.TempDir()
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: agents\n" +
		"    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n"
	for _, a := range apps {
		cfg += fmt.Sprintf("      - targets: [%q]\n        labels: {namespace: %q, app_kubernetes_io_name: %q, "+
			"agentrax_io_variant: %q}\n", a.addr, namespace, a.name, a.variant)
	}
	g.Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600)).To(Succeed())
	port := freePort(t)
	p := &promServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), out: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Prometheus dies with the test binary even when a timeout panic skips the cleanup.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.Expect(p.cmd.Start()).To(Succeed())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.out.String())
		}
	})
	g.Eventually(func(g Gomega) {
		resp, err := http.Get(p.url + "/-/ready")
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "prometheus ready")
	return p
}

// stop ends Prometheus and waits for it to exit.
func (p *promServer) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *promServer) client() *rollout.Prometheus {
	return &rollout.Prometheus{URL: p.url, Timeout: 2 * time.Second}
}

var isNaN = math.IsNaN
