// Package promlab is test support for canary analysis against a real Prometheus: small HTTP servers playing one
// variant of an agent (http_requests_total{code} and the http_request_duration_seconds histogram, with an error
// share and a latency the test controls), a traffic generator splitting requests by the weight a route accepted,
// and a Prometheus process (Debian's `prometheus` package, hack/ensure-prometheus.sh) on loopback scraping them
// every second with the labels a PodMonitor gives agent pods (namespace, app_kubernetes_io_name,
// agentrax_io_variant). Targets are found through a file_sd file, so one Prometheus serves tests that add their
// agents as they start. SetRuleFiles loads alerting rules too (test/promreal checks config/prometheus with it). Used
// by test/promreal and the controllers/agentrax envtest suite.
package promlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quartet-dev/quartet-operator/internal/testenv/services"
)

// Binary finds Prometheus: $PROMETHEUS_BIN, then PATH.
func Binary() (string, error) {
	if p := os.Getenv("PROMETHEUS_BIN"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	return "", errors.New("prometheus is not installed: run hack/ensure-prometheus.sh")
}

// RequireBinary returns Prometheus's path; without it the test fails under CI=true and is skipped otherwise.
func RequireBinary(t testing.TB) string {
	t.Helper()
	p, err := Binary()
	if err == nil {
		return p
	}
	services.Missing(t, "Prometheus", err)
	return ""
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// App is one variant of an agent: its own registry, served on a loopback port.
type App struct {
	Namespace, Name, Variant string
	// Addr is host:port of the metrics endpoint.
	Addr string

	mu        sync.Mutex
	errShare  float64
	latency   float64 // seconds
	pending   float64 // fractional requests not served yet
	errCredit float64
	requests  *prometheus.CounterVec
	durations prometheus.Histogram
	registry  *prometheus.Registry
	gauges    map[string]*prometheus.GaugeVec
	srv       *httptest.Server
}

// NewApp starts a variant serving 5 % errors at 80 ms until Set says otherwise; Close stops it.
func NewApp(namespace, name, variant string) *App {
	a := &App{Namespace: namespace, Name: name, Variant: variant, latency: 0.08, errShare: 0.05,
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
	a.registry, a.gauges = reg, map[string]*prometheus.GaugeVec{}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	// Scrapes hold the app's lock, so that a change made under it (SetPodGauges) is seen whole or not at all.
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		metrics.ServeHTTP(w, r)
	}))
	a.Addr = a.srv.Listener.Addr().String()
	return a
}

// StartApp is NewApp closed when the test ends.
func StartApp(t testing.TB, namespace, name, variant string) *App {
	a := NewApp(namespace, name, variant)
	t.Cleanup(a.Close)
	return a
}

// Close stops serving metrics.
func (a *App) Close() { a.srv.Close() }

// Set changes the share of 5xx responses and the latency (seconds) of the requests served from now on.
func (a *App) Set(errShare, latency float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errShare, a.latency = errShare, latency
}

// Serve records n requests (fractions carry over), spreading errors evenly so the error share is exact.
func (a *App) Serve(n float64) {
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

// SetPodGauges exports the gauge name once per simulated pod, labelled pod="pod-<i>", with perPod[i] as its value,
// and drops the series of pods beyond len(perPod). The change is atomic for Prometheus: one scrape sees all of
// it or none, so a consumer of the sum (an autoscaler) never acts on half a change.
func (a *App) SetPodGauges(name string, perPod []float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.gauges[name]
	if g == nil {
		g = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Set by the test, one series a pod."}, []string{"pod"})
		a.registry.MustRegister(g)
		a.gauges[name] = g
	}
	g.Reset()
	for i, v := range perPod {
		g.WithLabelValues(fmt.Sprintf("pod-%d", i)).Set(v)
	}
}

// Traffic sends requests per second to an agent, split between stable and canary by the canary weight.
type Traffic struct {
	mu     sync.Mutex
	rps    float64
	weight int32
	cancel context.CancelFunc
	done   chan struct{}
}

// Set changes the request rate (ignored when negative) and the canary weight (ignored when negative).
func (tr *Traffic) Set(rps float64, weight int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if rps >= 0 {
		tr.rps = rps
	}
	if weight >= 0 {
		tr.weight = weight
	}
}

// Weight is the canary weight traffic follows now.
func (tr *Traffic) Weight() int32 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.weight
}

// Stop ends the traffic and waits for the generator to return.
func (tr *Traffic) Stop() {
	tr.cancel()
	<-tr.done
}

// StartTraffic generates rps requests a second (in 50 ms ticks) until Stop; canary may be nil.
func StartTraffic(rps float64, stable, canary *App) *Traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &Traffic{rps: rps, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
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
				stable.Serve(n * (1 - w))
				if canary != nil {
					canary.Serve(n * w)
				}
			}
		}
	}()
	return tr
}

// Prometheus is a Prometheus process scraping the apps in its file_sd file every second.
type Prometheus struct {
	// URL is the base URL of its HTTP API.
	URL string

	bin, dir  string
	port      int
	ruleFiles []string
	// jobs are extra scrape_configs entries, in Prometheus's YAML (AddScrapeJob).
	jobs []string

	mu      sync.Mutex
	targets []*App
	cmd     *exec.Cmd
	out     *lockedBuffer
	done    chan struct{}
}

// lockedBuffer collects the process's output, written by exec's copying goroutine while tests read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// NewPrometheus prepares a Prometheus on port (FreePort when 0) with its data in dir; Start runs it.
func NewPrometheus(bin, dir string, port int) (*Prometheus, error) {
	if port == 0 {
		var err error
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	p := &Prometheus{URL: fmt.Sprintf("http://127.0.0.1:%d", port), bin: bin, dir: dir, port: port}
	if err := p.writeConfig(); err != nil {
		return nil, err
	}
	return p, p.writeTargets()
}

// writeConfig writes prometheus.yml: the file_sd scrape job and the rule files.
func (p *Prometheus) writeConfig() error {
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: agents\n" +
		"    scrape_interval: 1s\n    scrape_timeout: 1s\n    file_sd_configs:\n      - files: [" +
		fmt.Sprintf("%q", filepath.Join(p.dir, "targets.json")) + "]\n        refresh_interval: 1s\n"
	for _, job := range p.jobs {
		cfg += job
	}
	if len(p.ruleFiles) > 0 {
		cfg += "rule_files:\n"
		for _, f := range p.ruleFiles {
			cfg += fmt.Sprintf("  - %q\n", f)
		}
	}
	return os.WriteFile(filepath.Join(p.dir, "prometheus.yml"), []byte(cfg), 0o600)
}

// SetRuleFiles makes the next Start load these Prometheus rule files; Start fails when one does not parse.
func (p *Prometheus) SetRuleFiles(files ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ruleFiles = files
	return p.writeConfig()
}

// AddScrapeJob makes the next Start scrape job too: one scrape_configs entry in Prometheus's YAML, starting
// "  - job_name: …" (two spaces in), for a target that is not an App (the manager's HTTPS endpoint, say).
func (p *Prometheus) AddScrapeJob(job string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs = append(p.jobs, job)
	return p.writeConfig()
}

// StartPrometheus runs a Prometheus scraping apps, stopped when the test ends (its output is logged on failure).
func StartPrometheus(t testing.TB, apps ...*App) *Prometheus {
	t.Helper()
	p, err := NewPrometheus(RequireBinary(t), t.TempDir(), 0)
	if err == nil {
		err = p.AddTargets(apps...)
	}
	if err == nil {
		err = p.Start()
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.Output())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type fileSDGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// AddTargets makes Prometheus scrape apps too (file_sd picks the change up within a second).
func (p *Prometheus) AddTargets(apps ...*App) error {
	p.mu.Lock()
	p.targets = append(p.targets, apps...)
	p.mu.Unlock()
	return p.writeTargets()
}

func (p *Prometheus) writeTargets() error {
	p.mu.Lock()
	groups := []fileSDGroup{}
	for _, a := range p.targets {
		groups = append(groups, fileSDGroup{Targets: []string{a.Addr}, Labels: map[string]string{
			"namespace": a.Namespace, "app_kubernetes_io_name": a.Name, "agentrax_io_variant": a.Variant}})
	}
	p.mu.Unlock()
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	// Written aside and renamed: Prometheus never reads a half-written file.
	tmp := filepath.Join(p.dir, "targets.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(p.dir, "targets.json"))
}

// Start runs Prometheus (again, after Stop, on the same port and data) and waits until it is ready.
func (p *Prometheus) Start() error {
	p.mu.Lock()
	if p.cmd != nil && !p.exited() {
		p.mu.Unlock()
		return nil
	}
	p.out = &lockedBuffer{}
	p.done = make(chan struct{})
	p.cmd = exec.Command(p.bin, "--config.file="+filepath.Join(p.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(p.dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", p.port),
		"--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Prometheus dies with the test binary even when a timeout panic skips the cleanup.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.mu.Unlock()
		return err
	}
	cmd, done := p.cmd, p.done
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("prometheus exited: %s", p.Output())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready within 60s: %s", p.Output())
		}
	}
}

func (p *Prometheus) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop ends Prometheus and waits for it to exit.
func (p *Prometheus) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Output is what Prometheus logged in its current (or last) run.
func (p *Prometheus) Output() string {
	p.mu.Lock()
	out := p.out
	p.mu.Unlock()
	if out == nil {
		return ""
	}
	return out.String()
}
