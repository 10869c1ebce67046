// Package mcpregistry benchmarks the Agentrax MCP registry's read API with 1,000 registered agents against a
// baseline measured in the same run: a handler that writes a pre-encoded body of the same size. It also
// reports the persisted state's size and how many writes a steady minute causes. Results: docs/performance.md.
package mcpregistry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// countingPersister stands in for the ConfigMap: it counts writes and keeps the last state's size.
type countingPersister struct {
	mu    sync.Mutex
	saves int
	size  int
}

func (p *countingPersister) Load(context.Context) ([]byte, error) { return nil, nil }

func (p *countingPersister) Save(_ context.Context, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.saves++
	p.size = len(data)
	return nil
}

func (p *countingPersister) get() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.saves, p.size
}

func agentEntry(i int) registry.Entry {
	ns := fmt.Sprintf("tenant-%02d", i%20)
	name := fmt.Sprintf("agent-%04d", i)
	return registry.Entry{
		Namespace: ns, Name: name, Endpoint: fmt.Sprintf("http://%s.%s.svc:8080/mcp", name, ns),
		Tools:   []string{"search", "summarize", "plan", fmt.Sprintf("tool-%d-a", i), fmt.Sprintf("tool-%d-b", i)},
		Version: "1.0.0",
	}
}

func get(c *http.Client, url string) (time.Duration, int, error) {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return time.Since(start), int(n), nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func BenchmarkRegistryReads(b *testing.B) {
	agents := envInt("MCPREG_BENCH_AGENTS", 1000)
	requests := envInt("MCPREG_BENCH_REQUESTS", 2000)
	ctx := context.Background()
	for range b.N {
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		p := &countingPersister{}
		reg := registry.New(registry.Options{Clock: clk, Persister: p})
		reg.SetLeader(true)
		for i := range agents {
			if _, err := reg.Register(ctx, agentEntry(i)); err != nil {
				b.Fatal(err)
			}
		}
		srv := httptest.NewServer(registry.Handler(reg, registry.StaticToken("t")))
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

		// The baselines answer the same bytes, pre-encoded: what serving costs without the registry.
		bodies := map[string][]byte{}
		for _, path := range []string{"/agents", "/v0.1/servers?limit=100"} {
			resp, err := client.Get(srv.URL + path)
			if err != nil {
				b.Fatal(err)
			}
			bodies[path], _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := bodies[r.URL.RequestURI()]
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
		}))

		type row struct {
			name     string
			url      string
			baseline string
			lat      []time.Duration
			size     int
		}
		rows := []*row{
			{name: "baseline: pre-encoded /agents body", url: base.URL + "/agents"},
			{name: "GET /agents", url: srv.URL + "/agents", baseline: "baseline: pre-encoded /agents body"},
			{name: "baseline: pre-encoded servers page", url: base.URL + "/v0.1/servers?limit=100"},
			{name: "GET /v0.1/servers?limit=100", url: srv.URL + "/v0.1/servers?limit=100",
				baseline: "baseline: pre-encoded servers page"},
		}
		// Interleaved, so load from other work on the machine hits baseline and registry alike.
		for range requests {
			for _, r := range rows {
				d, n, err := get(client, r.url)
				if err != nil {
					b.Fatal(err)
				}
				r.lat, r.size = append(r.lat, d), n
			}
		}
		// A read right after a write pays the snapshot rebuild once.
		var afterWrite []time.Duration
		for i := range 50 {
			e := agentEntry(i)
			e.Tools = append(e.Tools, fmt.Sprintf("extra-%d", i))
			if _, err := reg.Register(ctx, e); err != nil {
				b.Fatal(err)
			}
			d, _, err := get(client, srv.URL+"/agents")
			if err != nil {
				b.Fatal(err)
			}
			afterWrite = append(afterWrite, d)
		}

		// One simulated steady minute on the injected clock: every agent heartbeated successfully at the
		// forced health interval, its reconcile re-registering the same content, the sweeper every 30 s.
		savesBefore, stateSize := p.get()
		interval := registry.HealthInterval(registry.DefaultTTL, time.Minute, 5*time.Second)
		nextSweep := registry.SweepInterval
		for elapsed := interval; elapsed <= time.Minute; elapsed += interval {
			clk.Step(interval)
			for i := range agents {
				e := agentEntry(i)
				if i < 50 {
					e.Tools = append(e.Tools, fmt.Sprintf("extra-%d", i))
				}
				if _, _, err := reg.Heartbeat(ctx, e.Key(), true); err != nil {
					b.Fatal(err)
				}
				if _, err := reg.Register(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			for ; nextSweep <= elapsed; nextSweep += registry.SweepInterval {
				if _, err := reg.Sweep(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		savesAfter, _ := p.get()
		srv.Close()
		base.Close()

		byName := map[string]*row{}
		fmt.Printf("\nmcpregistry: %d agents, %d sequential requests per row (interleaved, keep-alive, loopback)\n",
			agents, requests)
		fmt.Printf("%-38s %10s %12s %12s %10s %10s\n", "request", "bytes", "p50", "p99", "p50 ratio", "p99 ratio")
		for _, r := range rows {
			byName[r.name] = r
			p50, p99 := quantile(r.lat, .5), quantile(r.lat, .99)
			r50, r99 := "1.00", "1.00"
			if bl := byName[r.baseline]; bl != nil {
				r50 = fmt.Sprintf("%.2f", float64(p50)/float64(quantile(bl.lat, .5)))
				r99 = fmt.Sprintf("%.2f", float64(p99)/float64(quantile(bl.lat, .99)))
			}
			fmt.Printf("%-38s %10d %12s %12s %10s %10s\n", r.name, r.size, ms(p50), ms(p99), r50, r99)
		}
		fmt.Printf("%-38s %10s %12s %12s\n", "GET /agents right after a write", "", ms(quantile(afterWrite, .5)),
			ms(quantile(afterWrite, .99)))
		fmt.Printf("%-38s %10d bytes (ConfigMap limit 1 MiB)\n", "persisted state", stateSize)
		fmt.Printf("%-38s %10d (simulated minute: heartbeats every %s, sweeps every %s)\n",
			"state writes in a steady minute", savesAfter-savesBefore, interval, registry.SweepInterval)
	}
}
