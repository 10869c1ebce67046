package renderer

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Bounds per render. Helm templates are a language (`range until 1000000000` is a valid chart), and one shared
// renderer serves every tenant: a render past its time limit fails its own event, and while it still runs (Go
// templates cannot be interrupted) its tenant gets no second one, so a tenant can occupy at most one renderer
// core with runaway templates and the others keep rendering.
const (
	DefaultRenderTimeout  = time.Minute
	DefaultMaxOutputBytes = 64 << 20
)

// runaways counts, per tenant, the renders abandoned at their time limit and still running.
var runaways = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// renderBounded runs RenderAll under the server's time and output bounds.
func (s *Server) renderBounded(ctx context.Context, pc pipeline.Context, files map[string][]byte, in Input) (Output, error) {
	timeout := s.RenderTimeout
	if timeout <= 0 {
		timeout = DefaultRenderTimeout
	}
	in.MaxOutputBytes = s.MaxOutputBytes
	if in.MaxOutputBytes <= 0 {
		in.MaxOutputBytes = DefaultMaxOutputBytes
	}
	tenant := pc.Tenant
	if tenant == "" {
		tenant = pc.Namespace
	}
	runaways.Lock()
	busy := runaways.n[tenant]
	runaways.Unlock()
	if busy > 0 {
		return Output{}, status.Errorf(codes.ResourceExhausted, "source target %s/%s: an earlier render of tenant %s is still "+
			"running past the render time limit of %s; try again once it ended", pc.Namespace, pc.SourceTarget, tenant, timeout)
	}
	type result struct {
		out Output
		err error
	}
	done := make(chan result, 1)
	// finished and gaveUp decide, under mu, who accounts for a render abandoned at its limit.
	var mu sync.Mutex
	var finished, gaveUp bool
	go func() {
		out, err := RenderAll(files, in)
		mu.Lock()
		finished = true
		if gaveUp {
			runawayDone(tenant)
		}
		mu.Unlock()
		done <- result{out, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.out, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	mu.Lock()
	if finished { // it ended just now
		mu.Unlock()
		if r := <-done; ctx.Err() == nil {
			return r.out, r.err
		}
	} else {
		gaveUp = true
		runaways.Lock()
		runaways.n[tenant]++
		runaways.Unlock()
		mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return Output{}, status.FromContextError(err).Err()
	}
	return Output{}, status.Errorf(codes.ResourceExhausted, "source target %s/%s: the render did not finish within the render "+
		"time limit of %s (a template that loops, or a chart too large to render)", pc.Namespace, pc.SourceTarget, timeout)
}

func runawayDone(tenant string) {
	runaways.Lock()
	defer runaways.Unlock()
	if runaways.n[tenant]--; runaways.n[tenant] <= 0 {
		delete(runaways.n, tenant)
	}
}
