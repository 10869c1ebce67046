// Package registration connects the AgentDeployment reconciler to the MCP registry: it implements the
// reconciler's Registrar interface (Register on every reconcile of a running, exposed agent; Deregister before
// the finalizer goes) on top of registry.Registrar.
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
	"github.com/quartet-dev/quartet-operator/internal/registry"
)

// Adapter decides, per reconcile, between a full discovery, a heartbeat and nothing:
//   - full discovery (MCP handshake + tools/list) when the agent is not registered, or its stable image changed
//     since the last discovery (a canary promotion may change the tools);
//   - a heartbeat when the last one is at least Interval old (reconciles are far more frequent than that);
//   - nothing otherwise.
//
// The reconciler must requeue exposed agents after Interval so that heartbeats happen without other events.
type Adapter struct {
	Registrar *registry.Registrar
	// Interval is the health interval (registry.HealthInterval of the TTL and the configured interval).
	Interval time.Duration
	Clock    clock.PassiveClock

	mu sync.Mutex
	// discovered remembers each agent's fingerprint at its last discovery; after a restart every agent is
	// discovered once again, which is cheap and picks up changes made while no leader ran.
	discovered map[registry.Key]string
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
// the handshake failed (first registration) or the strikes ran out (MCPHandshakeFailed).
func (a *Adapter) Register(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	agent := AgentOf(ad)
	k := agent.Key()
	_, registered := a.Registrar.Registry.Get(k)
	fp := fingerprint(ad, agent)
	a.mu.Lock()
	if a.discovered == nil {
		a.discovered = map[registry.Key]string{}
	}
	last, known := a.discovered[k]
	a.mu.Unlock()
	if !registered || !known || last != fp {
		if _, err := a.Registrar.Register(ctx, agent); err != nil {
			if registered && errors.Is(err, registry.ErrHandshake) {
				// A registered agent that fails its rediscovery (a promoted image that does not answer) is
				// judged like a failed heartbeat: the strikes decide when its entry goes, not one failure.
				return a.strike(ctx, k, err)
			}
			return false, err
		}
		a.mu.Lock()
		a.discovered[k] = fp
		a.mu.Unlock()
		return true, nil
	}
	if lastSeen, _, ok := a.Registrar.Registry.Liveness(k); ok && a.now().Sub(lastSeen) < a.Interval {
		return true, nil
	}
	res, err := a.Registrar.Heartbeat(ctx, agent)
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
	res, _, err := a.Registrar.Registry.Heartbeat(ctx, k, false)
	switch {
	case res == registry.Deregistered:
		a.forget(k)
		return false, cause
	case err != nil:
		return true, err
	}
	return true, nil
}

// Deregister implements the reconciler's Registrar.
func (a *Adapter) Deregister(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	a.forget(registry.Key{Namespace: ad.Namespace, Name: ad.Name})
	return a.Registrar.Deregister(ctx, AgentOf(ad))
}

func (a *Adapter) forget(k registry.Key) {
	a.mu.Lock()
	delete(a.discovered, k)
	a.mu.Unlock()
}

func (a *Adapter) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}
