// Package registration connects the AgentDeployment reconciler to the MCP registry: it implements the
// reconciler's Registrar interface (Register on every reconcile of a running, exposed agent; Deregister before
// the finalizer goes) on top of registry.Prober.
package registration

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// Adapter decides, per reconcile, between a full discovery, a heartbeat and nothing:
//   - full discovery (MCP handshake + tools/list) when the agent is not registered, or its stable image changed
//     since the last discovery (a canary promotion may change the tools);
//   - a full discovery again when the last one is RelistInterval old: a server's tools can change without a new
//     image (a plugin loaded, a feature flag) — the fallback for servers that do not announce changes;
//   - a full discovery at once when a server that offers it sends notifications/tools/list_changed
//     (ListenForToolChanges, listen.go);
//   - a heartbeat when the last one is at least Interval old (reconciles are far more frequent than that);
//   - nothing otherwise.
//
// The reconciler must requeue exposed agents after Interval so that heartbeats happen without other events.
type Adapter struct {
	Prober *registry.Prober
	// Interval is the health interval (registry.HealthInterval of the TTL and the configured interval).
	Interval time.Duration
	// RelistInterval is how often a registered agent's tools are listed again (DefaultRelistInterval when
	// zero, never when negative).
	RelistInterval time.Duration
	Clock          clock.PassiveClock
	// ListenForToolChanges keeps, for each registered agent whose server offers capabilities.tools.listChanged,
	// one standing stream on which the server announces tool changes; each announcement re-lists at once
	// (listen.go). Listeners run while Start runs.
	ListenForToolChanges bool
	// ListenMaxAge bounds each stream (mcp.DefaultListenMaxAge when zero).
	ListenMaxAge time.Duration

	// ProbeWorkers, when positive, moves every discovery and heartbeat off the caller (the reconcile workers) onto
	// at most that many probes at once, each bounded by ProbeTimeout (probes.go): a dropped or hanging agent
	// then costs a probe slot, never a reconcile worker. Zero probes on the caller's goroutine (unit tests).
	ProbeWorkers int
	// ProbeTimeout bounds one probe as a whole (DefaultProbeTimeout when zero).
	ProbeTimeout time.Duration
	// Wake is called with an agent's key when its probe finished, so the reconciler acts on the outcome at once
	// (SetWake; the AgentDeployment controller turns it into a reconcile request).
	wake func(registry.Key)

	mu sync.Mutex
	// probes holds each agent's probe state when ProbeWorkers is positive (probes.go).
	probes map[registry.Key]*probeState
	slots  chan struct{}
	// discovered remembers each agent's fingerprint at its last discovery; after a restart every agent is
	// discovered once again, which is cheap and picks up changes made while no leader ran.
	discovered map[registry.Key]discovery
	// listeners are the agents' notification listeners (listen.go).
	listeners map[registry.Key]*listener
	lifetime  lifetime
}

// discovery is what the adapter remembers of an agent's last successful discovery.
type discovery struct {
	fingerprint string
	at          time.Time
}

// DefaultRelistInterval is how often registered agents' tools are listed again by default.
const DefaultRelistInterval = 10 * time.Minute

func (a *Adapter) relistInterval() time.Duration {
	if a.RelistInterval == 0 {
		return DefaultRelistInterval
	}
	return a.RelistInterval
}

// AgentOf maps an AgentDeployment to what the registry needs.
func AgentOf(ad *agentraxv1alpha1.AgentDeployment) *registry.Agent {
	a := &registry.Agent{Namespace: ad.Namespace, Name: ad.Name, Port: ad.Spec.Port,
		Version: imageTag(ad.Status.StableVersion)}
	if a.Port == 0 {
		a.Port = agentraxv1alpha1.DefaultPort
	}
	if ad.Spec.MCP != nil {
		a.Tools = ad.Spec.MCP.Tools
		a.Path = ad.Spec.MCP.Path
	}
	return a
}

// fingerprint is what a discovery depends on besides the agent's answer: its stable image (a canary promotion
// may change the tools), the endpoint and the declared tools. A change to any of them means a new discovery.
func fingerprint(ad *agentraxv1alpha1.AgentDeployment, a *registry.Agent) string {
	return ad.Status.StableVersion + "\x00" + strconv.Itoa(int(a.Port)) + a.Path + "\x00" + strings.Join(a.Tools, ",")
}

// HeartbeatInterval is how often the reconciler must come back to a registered agent for its heartbeat.
func (a *Adapter) HeartbeatInterval() time.Duration { return a.Interval }

// imageTag returns an image reference's tag, "" for a digest-only or untagged reference or a tag too long for
// server.json's version.
func imageTag(image string) string {
	if i := strings.LastIndex(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash || len(image)-colon-1 > registry.MaxVersionLen {
		return ""
	}
	return image[colon+1:]
}

// Register implements the reconciler's Registrar. It reports whether the agent is registered; an error means
// the handshake failed (first registration) or the strikes ran out (MCPHandshakeFailed). With ProbeWorkers it
// never waits for the agent: it starts a probe when one is due and reports the last finished one (probes.go).
func (a *Adapter) Register(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	if a.ProbeWorkers > 0 {
		return a.registerAsync(ad)
	}
	return a.probe(ctx, ad)
}

// due tells whether a discovery or a heartbeat of ad is due now (what probe would do other than answer at once).
func (a *Adapter) due(ad *agentraxv1alpha1.AgentDeployment) bool {
	agent := AgentOf(ad)
	k := agent.Key()
	_, registered := a.Prober.Registry.Get(k)
	a.mu.Lock()
	last, known := a.discovered[k]
	a.mu.Unlock()
	relist := a.relistInterval() > 0 && a.now().Sub(last.at) >= a.relistInterval()
	if !registered || !known || last.fingerprint != fingerprint(ad, agent) || relist {
		return true
	}
	lastSeen, _, ok := a.Prober.Registry.Liveness(k)
	return !ok || a.now().Sub(lastSeen) >= a.Interval
}

// probe decides between a discovery, a heartbeat and nothing, and carries it out on the caller's goroutine.
func (a *Adapter) probe(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	agent := AgentOf(ad)
	k := agent.Key()
	_, registered := a.Prober.Registry.Get(k)
	fp := fingerprint(ad, agent)
	a.mu.Lock()
	if a.discovered == nil {
		a.discovered = map[registry.Key]discovery{}
	}
	last, known := a.discovered[k]
	a.mu.Unlock()
	relist := a.relistInterval() > 0 && a.now().Sub(last.at) >= a.relistInterval()
	if !registered || !known || last.fingerprint != fp || relist {
		if _, err := a.Prober.Register(ctx, agent); err != nil {
			if registered && errors.Is(err, registry.ErrHandshake) {
				// A registered agent that fails its rediscovery (a promoted image that does not answer) is
				// judged like a failed heartbeat: the strikes decide when its entry goes, not one failure.
				return a.strike(ctx, k, err)
			}
			return false, err
		}
		a.mu.Lock()
		a.discovered[k] = discovery{fingerprint: fp, at: a.now()}
		a.mu.Unlock()
		a.ensureListener(k, fp, agent)
		return true, nil
	}
	if lastSeen, _, ok := a.Prober.Registry.Liveness(k); ok && a.now().Sub(lastSeen) < a.Interval {
		return true, nil
	}
	res, err := a.Prober.Heartbeat(ctx, agent)
	switch res {
	case registry.Deregistered:
		a.forget(k)
		return false, err
	case registry.Strike:
		// Still registered; the strikes are counted and the third one reports the failure.
		return true, nil
	}
	return err == nil, err
}

// strike records a failed probe of a registered agent; the third in a row deregisters it.
func (a *Adapter) strike(ctx context.Context, k registry.Key, cause error) (bool, error) {
	res, _, err := a.Prober.Registry.Heartbeat(ctx, k, false)
	switch {
	case res == registry.Deregistered:
		a.forget(k)
		return false, cause
	case err != nil:
		return true, err
	}
	return true, nil
}

// Deregister implements the reconciler's Registrar. A probe of the agent still running is cancelled and waited
// for first, so it cannot register the agent again after its entry went.
func (a *Adapter) Deregister(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	if err := a.stopProbe(ctx, registry.Key{Namespace: ad.Namespace, Name: ad.Name}); err != nil {
		return err
	}
	a.forget(registry.Key{Namespace: ad.Namespace, Name: ad.Name})
	return a.Prober.Deregister(ctx, AgentOf(ad))
}

func (a *Adapter) forget(k registry.Key) {
	a.mu.Lock()
	delete(a.discovered, k)
	a.stopListenerLocked(k)
	a.mu.Unlock()
}

func (a *Adapter) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}
