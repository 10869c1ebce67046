package source

import (
	"context"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every fetch holds a whole commit in memory. A push matched by ref alone in a monorepo starts one event per
// target: without sharing, N targets would fetch the same commit N times at once. So targets fetching the same
// commit of the same repository with the same credentials while a fetch is in flight share it, and at most
// MaxFetches fetches run at once per source handler.

// DefaultMaxFetches bounds the concurrent git fetches of a source handler when Handler.MaxFetches is 0.
const DefaultMaxFetches = 4

var gitFetches = prometheus.NewCounter(prometheus.CounterOpts{Name: "katastroma_source_git_fetches_total",
	Help: "Git fetches of a commit the source handler made (targets sharing a fetch count once)."})

func init() { ctrlmetrics.Registry.MustRegister(gitFetches) }

// fetchGroup shares fetches and bounds how many run. An entry lives while targets of an event still need it: the
// event announces its targets (expect) before any starts, each releases it after shipping, so every target of
// one event uses the one fetch however their goroutines are scheduled.
type fetchGroup struct {
	once    sync.Once
	sem     chan struct{}
	tenants *tenantSlots
	mu      sync.Mutex
	calls   map[string]*fetchCall
}

type fetchCall struct {
	refs    int
	started bool
	done    chan struct{}
	commit  *object.Commit
	err     error
}

func (h *Handler) fetchGroup() *fetchGroup {
	g := &h.fetches
	g.once.Do(func() {
		n := h.MaxFetches
		if n <= 0 {
			n = DefaultMaxFetches
		}
		g.sem, g.calls = make(chan struct{}, n), map[string]*fetchCall{}
		per := h.MaxFetchesPerTenant
		if per <= 0 {
			per = DefaultMaxFetchesPerTenant
		}
		g.tenants = &tenantSlots{max: per}
	})
	return g
}

// fetchKey identifies what a fetch holds: one commit of one repository read with one credential.
func fetchKey(t Target, sha string) string {
	return t.Namespace + "/" + t.CredentialSecret + "|" + NormalizeRepoURL(t.RepoURL) + "@" + sha
}

// expectFetch announces a target that will fetch sha (before the event's targets start).
func (h *Handler) expectFetch(t Target, sha string) {
	g := h.fetchGroup()
	g.mu.Lock()
	defer g.mu.Unlock()
	key := fetchKey(t, sha)
	c := g.calls[key]
	if c == nil {
		c = &fetchCall{done: make(chan struct{})}
		g.calls[key] = c
	}
	c.refs++
}

// releaseFetch says a target announced by expectFetch no longer needs the commit; the last one frees it.
func (h *Handler) releaseFetch(t Target, sha string) {
	g := h.fetchGroup()
	g.mu.Lock()
	defer g.mu.Unlock()
	key := fetchKey(t, sha)
	if c := g.calls[key]; c != nil {
		if c.refs--; c.refs <= 0 {
			delete(g.calls, key)
		}
	}
}

// sharedFetch fetches a target's commit once for every target announced for it (expectFetch), at most
// MaxFetches at once. The commit is only read afterwards (ShipSubtree), so the targets can share it. A target not
// announced fetches on its own.
func (h *Handler) sharedFetch(ctx context.Context, t Target, sha string, auth authMethod) (*object.Commit, error) {
	g := h.fetchGroup()
	key := fetchKey(t, sha)
	g.mu.Lock()
	c := g.calls[key]
	if c == nil {
		c = &fetchCall{done: make(chan struct{})} // not announced: not shared
	}
	leader := !c.started
	c.started = true
	g.mu.Unlock()
	if !leader {
		select {
		case <-c.done:
			return c.commit, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(c.done)
	// The tenant's slot first: a tenant waiting for its own slots holds none of the shared ones.
	tenant := h.Tenant(ctx, t.Namespace)
	if err := g.tenants.acquire(ctx, tenant); err != nil {
		c.err = err
		return nil, err
	}
	defer g.tenants.release(tenant)
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		c.err = ctx.Err()
		return nil, c.err
	}
	defer func() { <-g.sem }()
	gitFetches.Inc()
	c.commit, c.err = h.fetchCommit(ctx, t, sha, auth)
	return c.commit, c.err
}
