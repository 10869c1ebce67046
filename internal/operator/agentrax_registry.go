package operator

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxcontrollers "github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registration"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry/cmstore"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
)

// The registry keeps its state in ConfigMap agentrax-registry of the operator's namespace (the ClusterRole
// already grants ConfigMaps to the gnmic controllers; listed here for the registry's own needs) and checks
// ServiceAccount tokens of writers with TokenReviews.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// RegistrySettings configure the agentrax MCP discovery registry (docs/mcp-registry.md).
type RegistrySettings struct {
	// BindAddress is where the registry's HTTP API listens on every replica; "" or "0" disables the registry
	// (agents are then never registered).
	BindAddress string
	// Namespace holds ConfigMap agentrax-registry: the operator's own namespace.
	Namespace string
	// TTL is the default entry TTL (registry.MinTTL–MaxTTL); DefaultTTL when zero.
	TTL time.Duration
	// HealthInterval is the heartbeat interval asked for; it is forced below the TTL (registry.HealthInterval).
	HealthInterval time.Duration
	// RelistInterval is how often registered agents' tools are listed again (registration.DefaultRelistInterval
	// when zero, never when negative).
	RelistInterval time.Duration
	// ListenToolChanges keeps one notification stream per agent whose server offers tools.listChanged and
	// re-lists on each announcement (registration.Adapter.ListenForToolChanges).
	ListenToolChanges bool
	// TLSCertDir holds tls.crt and tls.key: the API then serves HTTPS only. Without it writes are refused
	// unless PlaintextWrites (development only).
	TLSCertDir      string
	PlaintextWrites bool
	// MaxEntriesPerNamespace caps the entries of one namespace (registry.DefaultMaxEntriesPerNamespace when zero).
	MaxEntriesPerNamespace int
	// SweepInterval overrides registry.SweepInterval (tests only).
	SweepInterval time.Duration
	// TokenSecret is "namespace/name" (or "name" in Namespace) of a Secret whose key "token" authorizes
	// writes in every namespace.
	TokenSecret string
	// Writers are ServiceAccounts ("namespace/name") whose tokens may write the agents of their own
	// namespace; ClusterWriters may write every namespace. Tokens are checked with a TokenReview.
	Writers, ClusterWriters []string
	// TokenAudience is the audience ServiceAccount tokens must be issued for; empty accepts tokens for the
	// API server itself.
	TokenAudience string
	// Listening, when set, receives the API's bound address (tests bind port 0).
	Listening func(addr string)
}

// Enabled reports whether the registry runs.
func (s RegistrySettings) Enabled() bool { return s.BindAddress != "" && s.BindAddress != "0" }

// EffectiveTTL returns the TTL, checked against the registry's bounds.
func (s RegistrySettings) EffectiveTTL() (time.Duration, error) {
	if s.TTL == 0 {
		return registry.DefaultTTL, nil
	}
	if s.TTL < registry.MinTTL || s.TTL > registry.MaxTTL {
		return 0, fmt.Errorf("registry TTL %s: must be between %s and %s", s.TTL, registry.MinTTL, registry.MaxTTL)
	}
	return s.TTL, nil
}

// WrapAgentRegistrar wraps, when set, the Registrar the AgentDeployment controller gets (tests record the
// calls made to the real one).
var WrapAgentRegistrar func(agentraxcontrollers.Registrar) agentraxcontrollers.Registrar

// agentRegistrar runs the registry in the manager and returns what the AgentDeployment reconciler calls:
// a registration.Adapter, or the NoopRegistrar when the registry is disabled. Every replica serves the API
// from its watch of the ConfigMap; only the elected leader discovers, heartbeats, writes and sweeps (the
// reconciler itself runs only on the leader).
func agentRegistrar(mgr ctrl.Manager, s RegistrySettings, dial *devdial.Map) (agentraxcontrollers.Registrar, error) {
	var r agentraxcontrollers.Registrar = agentraxcontrollers.NoopRegistrar{}
	if s.Enabled() {
		adapter, err := startRegistry(mgr, s, dial)
		if err != nil {
			return nil, fmt.Errorf("agentrax MCP registry: %w", err)
		}
		r = adapter
	}
	if WrapAgentRegistrar != nil {
		r = WrapAgentRegistrar(r)
	}
	return r, nil
}

func startRegistry(mgr ctrl.Manager, s RegistrySettings, dial *devdial.Map) (*registration.Adapter, error) {
	if s.Namespace == "" {
		return nil, errors.New("no namespace for ConfigMap agentrax-registry: set --registry-namespace or POD_NAMESPACE")
	}
	ttl, err := s.EffectiveTTL()
	if err != nil {
		return nil, err
	}
	// One uncached client for the ConfigMap, its watch and the TokenReviews: a cold start must read what the
	// API server has, and caching every ConfigMap of the cluster for one object would cost far more.
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	log := mgr.GetLogger().WithName("agentrax-registry")
	reg := registry.New(registry.Options{DefaultTTL: ttl, Persister: &cmstore.Store{Client: c, Namespace: s.Namespace},
		MaxEntriesPerNamespace: s.MaxEntriesPerNamespace, Log: log})
	auth, err := s.authenticator(mgr, c)
	if err != nil {
		return nil, err
	}
	svc := &cmstore.Service{Registry: reg, Addr: s.BindAddress, Auth: auth, Watcher: c, Namespace: s.Namespace,
		SweepInterval: s.SweepInterval, Listening: s.Listening, TLSCertDir: s.TLSCertDir, PlaintextWrites: s.PlaintextWrites}
	if err := svc.AddTo(mgr); err != nil {
		return nil, err
	}
	interval := registry.HealthInterval(ttl, s.HealthInterval, mcp.DefaultCallTimeout)
	if s.HealthInterval > 0 && interval != s.HealthInterval {
		log.Info("health interval forced below the TTL so that 3 failed heartbeats deregister before expiry",
			"requested", s.HealthInterval.String(), "used", interval.String(), "ttl", ttl.String())
	}
	// Probes run on workers of their own, each with its own deadline: an agent that does not answer (a network
	// policy dropping the operator's packets) costs a probe slot, never one of the reconcile workers.
	adapter := &registration.Adapter{Interval: interval, RelistInterval: s.RelistInterval,
		ProbeWorkers: registration.DefaultProbeWorkers, ProbeTimeout: registration.DefaultProbeTimeout,
		ListenForToolChanges: s.ListenToolChanges,
		Prober:               &registry.Prober{Registry: reg, Client: &mcp.Client{HTTP: dial.HTTPClient()}}}
	// A leader-election runnable (the default): the listeners stop when this replica stops leading, with the
	// reconciler that started them.
	if err := mgr.Add(adapter); err != nil {
		return nil, err
	}
	return adapter, nil
}

// authenticator combines the configured ways to authorize writes; with none, every write is refused.
func (s RegistrySettings) authenticator(mgr ctrl.Manager, c client.Client) (registry.Authenticator, error) {
	var auth registry.AnyOf
	if s.TokenSecret != "" {
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.TokenSecret}
		if ns, name, ok := strings.Cut(s.TokenSecret, "/"); ok {
			key = types.NamespacedName{Namespace: ns, Name: name}
		}
		if key.Namespace == "" || key.Name == "" || strings.Contains(key.Name, "/") {
			return nil, fmt.Errorf("registry token Secret %q: want namespace/name", s.TokenSecret)
		}
		// The API reader: Secrets are not cached by the manager, and a rotated token applies at once.
		auth = append(auth, &registry.SecretToken{Reader: mgr.GetAPIReader(), Secret: key})
	}
	for _, sa := range append(append([]string(nil), s.Writers...), s.ClusterWriters...) {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("registry writer %q: want namespace/name of a ServiceAccount", sa)
		}
	}
	if len(s.Writers)+len(s.ClusterWriters) > 0 {
		tr := &registry.TokenReview{Client: c, Allowed: s.Writers, ClusterWide: s.ClusterWriters}
		if s.TokenAudience != "" {
			tr.Audiences = []string{s.TokenAudience}
		}
		auth = append(auth, tr)
	}
	if len(auth) == 0 {
		return nil, nil
	}
	return auth, nil
}
