package source

import (
	"context"
	"sync"
)

// DefaultMaxFetchesPerTenant bounds the fetches one tenant runs at once (--max-fetches-per-tenant), so one
// tenant's many targets or huge repositories cannot take every fetch slot (MaxFetches) from the others.
const DefaultMaxFetchesPerTenant = 2

// tenantSlots counts the fetches running per tenant.
type tenantSlots struct {
	max  int
	mu   sync.Mutex
	cond map[string]chan struct{} // closed and replaced whenever a slot of the tenant frees
	n    map[string]int
}

// acquire waits for one of tenant's slots (or ctx).
func (s *tenantSlots) acquire(ctx context.Context, tenant string) error {
	for {
		s.mu.Lock()
		if s.n == nil {
			s.n, s.cond = map[string]int{}, map[string]chan struct{}{}
		}
		if s.n[tenant] < s.max {
			s.n[tenant]++
			s.mu.Unlock()
			return nil
		}
		freed := s.cond[tenant]
		if freed == nil {
			freed = make(chan struct{})
			s.cond[tenant] = freed
		}
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release frees one of tenant's slots.
func (s *tenantSlots) release(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[tenant]--; s.n[tenant] <= 0 {
		delete(s.n, tenant)
	}
	if c := s.cond[tenant]; c != nil {
		close(c)
		delete(s.cond, tenant)
	}
}
