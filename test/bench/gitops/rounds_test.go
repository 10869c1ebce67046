package gitops

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// requestCounter counts the API requests of the pipeline's clients by HTTP method (a GET is a read or a list).
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

type countingTransport struct {
	c    *requestCounter
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.mu.Lock()
	if t.c.n == nil {
		t.c.n = map[string]int{}
	}
	t.c.n[req.Method]++
	t.c.mu.Unlock()
	return t.next.RoundTrip(req)
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{c: c, next: rt}
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = map[string]int{}
}

// String is e.g. "41 (GET 35, PUT 4, PATCH 2)".
func (c *requestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	total, parts := 0, []string{}
	for _, m := range slices.Sorted(maps.Keys(c.n)) {
		total += c.n[m]
		parts = append(parts, fmt.Sprintf("%s %d", m, c.n[m]))
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

// round is one measurement: the baseline and the pipeline on fresh namespaces, back to back.
type round struct {
	kubectl, pipeline, noChange, kubectlAgain time.Duration
	written                                   int
	// noChangeRequests are the API requests the pipeline made during the no-change push, by verb.
	noChangeRequests string
	// load and loadAfter are the 1-minute load average when the round started and ended (/proc/loadavg).
	load, loadAfter string
}

func (r round) ratio() float64         { return r.pipeline.Seconds() / r.kubectl.Seconds() }
func (r round) noChangeRatio() float64 { return r.noChange.Seconds() / r.kubectl.Seconds() }

// benchRounds is how many rounds one benchmark iteration runs (GITOPS_BENCH_ROUNDS, default 5): the bounds are
// judged on the median of several rounds, since one round on a shared machine says more about the load than the
// code.
func benchRounds(b *testing.B) int {
	v := os.Getenv("GITOPS_BENCH_ROUNDS")
	if v == "" {
		return 5
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("GITOPS_BENCH_ROUNDS=%q: want a positive number", v)
	}
	return n
}

// loadAverage is the 1-minute load average, or "?" where /proc/loadavg cannot be read.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

// profileNoChange writes a CPU profile of round i's no-change push to $GITOPS_BENCH_NOCHANGE_PROFILE.<i> when set
// (the pipeline runs in the benchmark's process; kubectl and the API server do not, so the profile is the
// pipeline's own work). Not together with go test's -cpuprofile: only one CPU profile runs at a time.
func profileNoChange(b *testing.B, i int) func() {
	base := os.Getenv("GITOPS_BENCH_NOCHANGE_PROFILE")
	if base == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", base, i))
	must(b, err)
	must(b, pprof.StartCPUProfile(f))
	return func() {
		pprof.StopCPUProfile()
		must(b, f.Close())
	}
}

// median of xs (not empty).
func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// report prints the rounds as a table with the median and spread of each ratio, reports the medians as metrics
// and fails the benchmark when a median is above its bound. Single rounds above a bound are shown, not failed:
// on a loaded machine one round measures the neighbours.
func report(b *testing.B, rs []round) {
	var deploy, noChange []float64
	fmt.Printf("\n| %d manifests, round (load average) | kubectl apply --server-side | pipeline: webhook → applied | "+
		"no-change push (objects written; API requests) | kubectl apply again (no change) |\n|---|---|---|---|---|\n", manifests)
	for i, r := range rs {
		deploy, noChange = append(deploy, r.ratio()), append(noChange, r.noChangeRatio())
		fmt.Printf("| %d (%s–%s) | %s | %s (%.2f×) | %s (%.2f×, %d; %s) | %s |\n", i+1, r.load, r.loadAfter,
			r.kubectl.Round(time.Millisecond), r.pipeline.Round(time.Millisecond), r.ratio(),
			r.noChange.Round(time.Millisecond), r.noChangeRatio(), r.written, r.noChangeRequests,
			r.kubectlAgain.Round(time.Millisecond))
	}
	md, mn := median(deploy), median(noChange)
	fmt.Printf("\nwebhook → applied: median %.2f× kubectl (%.2f–%.2f× over %d rounds; bound %.1f×)\n", md,
		slices.Min(deploy), slices.Max(deploy), len(rs), maxDeployRatio)
	fmt.Printf("no-change push: median %.2f× kubectl (%.2f–%.2f× over %d rounds; bound %.1f×)\n", mn,
		slices.Min(noChange), slices.Max(noChange), len(rs), maxNoChangeRatio)
	b.ReportMetric(md, "median-ratio")
	b.ReportMetric(mn, "median-nochange-ratio")
	if md > maxDeployRatio {
		b.Errorf("webhook → applied: median %.2f× kubectl is above the bound of %.1f×", md, maxDeployRatio)
	}
	if mn > maxNoChangeRatio {
		b.Errorf("no-change push: median %.2f× kubectl is above the bound of %.1f×", mn, maxNoChangeRatio)
	}
}
