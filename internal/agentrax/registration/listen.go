package registration

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// Reconnect policy of a listener whose stream failed: exponential backoff with jitter between these bounds. A
// stream that stayed up for listenHealthy is reopened at once (it ended by its own age limit or a server
// restart, not by a failure).
const (
	listenMinBackoff = time.Second
	listenMaxBackoff = 5 * time.Minute
	listenHealthy    = 30 * time.Second
)

// listener is one agent's notification listener.
type listener struct {
	// fingerprint is the discovery it belongs to: a new image, port, path or declared tools replace it.
	fingerprint string
	cancel      context.CancelFunc
	done        chan struct{}
	// notOffered is set when the server does not offer tools.listChanged: the listener ended and is not tried
	// again for this fingerprint (the relist interval covers the agent).
	notOffered bool
}

// lifetime is the context listeners run under, created on first use and ended when Start returns.
type lifetime struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *lifetime) get() (context.Context, context.CancelFunc) {
	l.once.Do(func() { l.ctx, l.cancel = context.WithCancel(context.Background()) })
	return l.ctx, l.cancel
}

// Start runs until ctx ends, then stops every listener and waits for them. The operator adds the Adapter to the
// manager as a leader-election runnable: listeners run where the reconciler that calls Register runs.
func (a *Adapter) Start(ctx context.Context) error {
	_, cancel := a.lifetime.get()
	<-ctx.Done()
	cancel()
	a.mu.Lock()
	var running []chan struct{}
	for _, l := range a.listeners {
		running = append(running, l.done)
	}
	a.mu.Unlock()
	for _, done := range running {
		<-done
	}
	return nil
}

// ensureListener starts the agent's listener after a discovery, unless one runs (or was refused) for the same
// fingerprint; a listener of an older fingerprint is stopped first.
func (a *Adapter) ensureListener(k registry.Key, fp string, agent *registry.Agent) {
	if !a.ListenForToolChanges {
		return
	}
	base, _ := a.lifetime.get()
	a.mu.Lock()
	defer a.mu.Unlock()
	if l, ok := a.listeners[k]; ok {
		if l.fingerprint == fp && (l.notOffered || !closed(l.done)) {
			return
		}
		l.cancel()
	}
	if base.Err() != nil {
		return
	}
	if a.listeners == nil {
		a.listeners = map[registry.Key]*listener{}
	}
	ctx, cancel := context.WithCancel(base)
	l := &listener{fingerprint: fp, cancel: cancel, done: make(chan struct{})}
	a.listeners[k] = l
	go a.listen(ctx, l, k, agent)
}

// stopListenerLocked stops the agent's listener (a.mu held).
func (a *Adapter) stopListenerLocked(k registry.Key) {
	if l, ok := a.listeners[k]; ok {
		l.cancel()
		delete(a.listeners, k)
	}
}

// listen keeps one stream open to the agent, reopening it when it ends, and re-lists on every announcement. A
// change announced while no stream is open (between a failure and the reconnect) is found by the relist
// interval.
func (a *Adapter) listen(ctx context.Context, l *listener, k registry.Key, agent *registry.Agent) {
	defer close(l.done)
	endpoint := agent.Endpoint()
	wait := listenMinBackoff
	for ctx.Err() == nil {
		opened := time.Now()
		err := a.Prober.Client.ListenToolChanges(ctx, endpoint, a.ListenMaxAge, func() { a.relist(ctx, k, l.fingerprint, agent) })
		if errors.Is(err, mcp.ErrListChangedNotOffered) {
			a.mu.Lock()
			l.notOffered = true
			a.mu.Unlock()
			return
		}
		if time.Since(opened) >= listenHealthy {
			wait = listenMinBackoff
			continue
		}
		// Jitter spreads the reconnects of many agents after an operator-side network blip.
		pause := wait/2 + rand.N(wait/2+1)
		wait = min(2*wait, listenMaxBackoff)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// relist discovers the agent again after an announcement and updates its entry, never creating one: an
// announcement that arrives after the entry was removed (strikes, deregistration, sweep) leaves it removed, and
// only the reconciler's next discovery registers the agent again. A failure is left to the reconciler: its next
// heartbeat or relist judges the agent by the strike rule.
func (a *Adapter) relist(ctx context.Context, k registry.Key, fp string, agent *registry.Agent) {
	if ctx.Err() != nil {
		return
	}
	if err := a.Prober.Relist(ctx, agent); err != nil {
		return
	}
	a.mu.Lock()
	if last, ok := a.discovered[k]; ok && last.fingerprint == fp {
		a.discovered[k] = discovery{fingerprint: fp, at: a.now()}
	}
	a.mu.Unlock()
}

// listening reports whether any listener runs.
func (a *Adapter) listening() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range a.listeners {
		if !closed(l.done) {
			return true
		}
	}
	return false
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
