package targetsource

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// managerProcess is the operator binary (./cmd) running as a process of its own, so that its heap holds only
// what the manager holds: the benchmark's inventory server, baseline client and API server stay out of it.
type managerProcess struct {
	cmd     *exec.Cmd
	metrics string // http://host:port/metrics
	pprof   string // http://host:port

	mu sync.Mutex
	// From GODEBUG=gctrace=1: the largest heap at the start of a GC (the heap peaks just before a collection)
	// and the live heap after the last one.
	gcPeakMiB, gcLiveMiB int
	gcCount              int
	// Sampled from the metrics endpoint.
	heapInuse, rss float64
	started        chan struct{}
	exited         chan struct{}
}

// gcLine matches gctrace's "… 45->47->20 MB, 50 MB goal …" (the runtime's MB are 2^20 bytes).
var gcLine = regexp.MustCompile(`^gc \d+ .* (\d+)->(\d+)->(\d+) MB, `)

// buildManager compiles ./cmd into dir.
func buildManager(b *testing.B, dir string) string {
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building ./cmd: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(b, err)
	addr := ln.Addr().String()
	must(b, ln.Close())
	return addr
}

// startManager runs the binary with a kubeconfig for env's API server, only the gnmic-targetsource controller,
// its cache limited to the benchmark namespace, plain-HTTP metrics, and returns once its workers have started
// (the controller's caches are synced).
func startManager(ctx context.Context, b *testing.B, bin string, kubeconfig []byte, args ...string) *managerProcess {
	dir := filepath.Dir(bin)
	kc := filepath.Join(dir, "kubeconfig")
	must(b, os.WriteFile(kc, kubeconfig, 0o600))
	metricsAddr, pprofAddr := freeAddr(b), freeAddr(b)
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--pprof-bind-address=" + pprofAddr,
		"--enable-webhooks=false", "--log-level=info",
	}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "GODEBUG=gctrace=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	stderr, err := cmd.StderrPipe()
	must(b, err)
	cmd.Stdout = io.Discard
	must(b, cmd.Start())
	p := &managerProcess{cmd: cmd, metrics: "http://" + metricsAddr + "/metrics", pprof: "http://" + pprofAddr, started: make(chan struct{}), exited: make(chan struct{})}
	go p.readStderr(stderr)
	go func() { _ = cmd.Wait(); close(p.exited) }()
	select {
	case <-p.started:
	case <-p.exited:
		b.Fatal("the manager exited during start-up")
	case <-time.After(2 * time.Minute):
		b.Fatal("the manager's workers did not start within 2 minutes")
	}
	go p.sample(ctx)
	return p
}

func (p *managerProcess) readStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	once := sync.Once{}
	for sc.Scan() {
		line := sc.Text()
		if m := gcLine.FindStringSubmatch(line); m != nil {
			start, _ := strconv.Atoi(m[1])
			live, _ := strconv.Atoi(m[3])
			p.mu.Lock()
			p.gcPeakMiB, p.gcLiveMiB = max(p.gcPeakMiB, start), live
			p.gcCount++
			p.mu.Unlock()
			continue
		}
		if strings.Contains(line, `"Starting workers"`) && strings.Contains(line, `"gnmic-targetsource"`) {
			once.Do(func() { close(p.started) })
		}
		if strings.Contains(line, `"level":"error"`) {
			fmt.Fprintln(os.Stderr, "manager:", line)
		}
	}
}

// sample scrapes the metrics endpoint once a second for the heap in use and the resident set: a cross-check of
// the GC trace's peak (a lower bound, between samples the heap can be higher). Scraping is not free for the
// manager (the Go collector's series rendered as text: ~2 ms of its CPU each), so it is kept rare; a 100 ms
// period cost it a third of its CPU in the first sync.
func (p *managerProcess) sample(ctx context.Context) {
	for {
		if v, err := scrape(ctx, p.metrics, "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes"); err == nil {
			p.mu.Lock()
			p.heapInuse = max(p.heapInuse, v["go_memstats_heap_inuse_bytes"])
			p.rss = max(p.rss, v["process_resident_memory_bytes"])
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-p.exited:
			return
		case <-time.After(time.Second):
		}
	}
}

type heapFigures struct {
	gcPeakMiB, gcLiveMiB, gcCount int
	heapInuseMiB, rssMiB          float64
}

func (p *managerProcess) figures() heapFigures {
	p.mu.Lock()
	defer p.mu.Unlock()
	return heapFigures{gcPeakMiB: p.gcPeakMiB, gcLiveMiB: p.gcLiveMiB, gcCount: p.gcCount,
		heapInuseMiB: p.heapInuse / (1 << 20), rssMiB: p.rss / (1 << 20)}
}

// cpuSeconds is the manager's process_cpu_seconds_total: CPU time it used, whatever else loads the machine.
func (p *managerProcess) cpuSeconds(ctx context.Context, b *testing.B) float64 {
	v, err := scrape(ctx, p.metrics, "process_cpu_seconds_total")
	must(b, err)
	return v["process_cpu_seconds_total"]
}

// profile records a 60 s CPU profile of the manager into path (none when path is empty); the returned channel
// is closed when it is written.
func (p *managerProcess) profile(ctx context.Context, b *testing.B, path string) <-chan struct{} {
	done := make(chan struct{})
	if path == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.pprof+"/debug/pprof/profile?seconds=60", nil)
		if err != nil {
			b.Error(err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		f, err := os.Create(path)
		if err != nil {
			b.Error(err)
			return
		}
		defer func() { _ = f.Close() }()
		if _, err := io.Copy(f, resp.Body); err != nil {
			b.Error(err)
		}
	}()
	return done
}

// stop interrupts the manager and waits for it to exit.
func (p *managerProcess) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// plainHTTP asks for uncompressed answers, sparing the manager gzip work on every scrape.
var plainHTTP = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// scrape reads unlabelled gauges from a Prometheus text endpoint.
func scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := plainHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				out[n], _ = strconv.ParseFloat(strings.TrimSpace(value), 64)
			}
		}
	}
	return out, sc.Err()
}

// labelPair matches one name="value" pair of a Prometheus text line.
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// targetWrites sums the API server's apiserver_request_total for writes to Target objects (not status), by any
// client: the count of what the manager process wrote, read where the writes land.
func targetWrites(ctx context.Context, b *testing.B, cfg *rest.Config) int64 {
	writes, _ := apiserverCounters(ctx, b, cfg)
	return writes
}

// apiserverCounters reads the Target writes (see targetWrites) and the API server's process_cpu_seconds_total.
func apiserverCounters(ctx context.Context, b *testing.B, cfg *rest.Config) (int64, float64) {
	hc, err := rest.HTTPClientFor(cfg)
	must(b, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	must(b, err)
	resp, err := hc.Do(req)
	must(b, err)
	defer func() { _ = resp.Body.Close() }()
	var total int64
	var cpu float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			cpu, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			continue
		}
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(line, -1) {
			labels[m[1]] = m[2]
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		if labels["group"] != "operator.gnmic.dev" || labels["resource"] != "targets" || labels["subresource"] != "" {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		must(b, err)
		total += int64(v)
	}
	must(b, sc.Err())
	return total, cpu
}
