package registration

import (
	"context"
	"errors"
	"time"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// Probe defaults (ProbeWorkers, ProbeTimeout).
const (
	// DefaultProbeWorkers is how many agents the operator probes at once.
	DefaultProbeWorkers = 8
	// DefaultProbeTimeout bounds one probe: a discovery is an initialize, a tools/list (a few pages) and the
	// session's end, each exchange bounded by the MCP client's own call timeout.
	DefaultProbeTimeout = 15 * time.Second
)

// probeState is one agent's probe: running, or the outcome of the last one.
type probeState struct {
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
	// finished is when the last probe ended; registered and err its outcome.
	finished   time.Time
	registered bool
	err        error
}

// SetWake sets the function told of each finished probe (the AgentDeployment controller's wake-up source).
func (a *Adapter) SetWake(wake func(registry.Key)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wake = wake
}

func (a *Adapter) probeTimeout() time.Duration {
	if a.ProbeTimeout > 0 {
		return a.ProbeTimeout
	}
	return DefaultProbeTimeout
}

// registerAsync answers from the last finished probe and starts a new one when one is due: never while one
// runs, and after a failed one not before Interval passed (a dropped agent is retried at the health interval,
// as a synchronous failure was requeued, not on every reconcile its wake-up causes).
func (a *Adapter) registerAsync(ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	k := registry.Key{Namespace: ad.Namespace, Name: ad.Name}
	_, inRegistry := a.Prober.Registry.Get(k)
	a.mu.Lock()
	if a.probes == nil {
		a.probes = map[registry.Key]*probeState{}
		a.slots = make(chan struct{}, a.ProbeWorkers)
	}
	st := a.probes[k]
	if st == nil {
		st = &probeState{}
		a.probes[k] = st
	}
	registered, err := inRegistry, error(nil)
	if !st.finished.IsZero() {
		registered, err = st.registered && inRegistry, st.err
	}
	backoff := st.err != nil && a.now().Sub(st.finished) < a.retryAfter(st.err)
	if st.running || backoff {
		a.mu.Unlock()
		return registered, err
	}
	a.mu.Unlock()
	if !a.due(ad) {
		return inRegistry, nil
	}
	a.mu.Lock()
	if st.running {
		a.mu.Unlock()
		return registered, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	st.running, st.cancel, st.done = true, cancel, make(chan struct{})
	a.mu.Unlock()
	go a.runProbe(ctx, ad.DeepCopy(), k, st)
	return registered, err
}

// runProbe waits for a probe slot, probes the agent within ProbeTimeout, records the outcome and wakes the
// reconciler.
func (a *Adapter) runProbe(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, k registry.Key, st *probeState) {
	var registered bool
	var err error
	select {
	case a.slots <- struct{}{}:
		pctx, cancel := context.WithTimeout(ctx, a.probeTimeout())
		registered, err = a.probe(pctx, ad)
		cancel()
		<-a.slots
	case <-ctx.Done():
		err = ctx.Err()
	}
	a.mu.Lock()
	st.running, st.cancel = false, nil
	st.finished, st.registered, st.err = a.now(), registered, err
	wake := a.wake
	close(st.done)
	a.mu.Unlock()
	if ctx.Err() == nil && wake != nil {
		wake(k)
	}
}

// retryAfter is how long a failed probe is not repeated: a failed handshake or heartbeat until the next health
// interval, a registry that could not record it (not leading yet, a failed ConfigMap write) for a second.
func (a *Adapter) retryAfter(err error) time.Duration {
	if errors.Is(err, registry.ErrHandshake) {
		return a.Interval
	}
	return time.Second
}

// stopProbe cancels the agent's running probe, waits for it to end, and forgets its outcome.
func (a *Adapter) stopProbe(ctx context.Context, k registry.Key) error {
	a.mu.Lock()
	st := a.probes[k]
	delete(a.probes, k)
	var cancel context.CancelFunc
	var done chan struct{}
	if st != nil {
		cancel, done = st.cancel, st.done
	}
	a.mu.Unlock()
	if done == nil {
		return nil
	}
	if cancel != nil {
		cancel()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
