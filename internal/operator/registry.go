package operator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-dev/quartet-operator/internal/devdial"
	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// Groups are the API groups' short names, as used by --groups and in controller names.
var Groups = []string{"fleet", "gnmic", "agentrax", "gitops"}

// Kind names a kind by group short name and kind, e.g. "gnmic/Target".
type Kind string

// Controller is one reconciler the manager can run.
type Controller struct {
	// Name is "<group>-<kind>", unique across groups.
	Name string
	// Group is the short name of the API group the controller belongs to.
	Group string
	// Reads lists every kind the controller reads; their webhooks are served whenever it runs.
	Reads []Kind
	// Requires names controllers that must run in the same manager for this one to be useful (e.g. the
	// CollectorDiscovery controller only creates Collector CRs; the Collector controller acts on them).
	Requires []string
	// Setup registers the controller with the manager.
	Setup func(ctx context.Context, mgr ctrl.Manager, deps Dependencies) error
}

// Webhook is the admission webhook of one kind.
type Webhook struct {
	Kind  Kind
	Setup func(mgr ctrl.Manager) error
	// SetupWithDeps, when set, is used instead of Setup for webhooks that need the manager's configuration.
	SetupWithDeps func(mgr ctrl.Manager, deps Dependencies) error
}

// Dependencies are what controllers get from the manager's configuration.
type Dependencies struct {
	// Concurrency maps controller name to MaxConcurrentReconciles; missing means 1.
	Concurrency map[string]int
	// APIBindAddress is where the operator's own HTTP API (e.g. the TargetSource refresh API) listens, on every
	// replica; empty disables it.
	APIBindAddress string
	// WatchNamespaces are the namespaces the manager's cache holds (--watch-namespaces); empty means all.
	WatchNamespaces []string
	// Clock is the time source of controllers that accept one (tests inject a fake); nil means the real clock.
	Clock clock.PassiveClock
	// GPUResourceName is the extended resource agentrax counts as GPUs (--gpu-resource-name); empty means
	// nvidia.com/gpu.
	GPUResourceName string
	// QuotaResync is how often every agentrax TenantQuota is counted again without an event
	// (--tenantquota-resync-interval); zero means agentrax.DefaultQuotaResync.
	QuotaResync time.Duration
	// GNMIc configures the gnmic Cluster controller's collector follow-up.
	GNMIc GNMIcSettings
	// Canary configures agentrax canary analysis (--prometheus-url, --prometheus-failsafe-timeout,
	// --canary-analysis-interval).
	Canary CanarySettings
	// Fleet configures the Fleet Management API client of the fleet group.
	Fleet FleetSettings
	// Registry configures the agentrax MCP discovery registry.
	Registry RegistrySettings
	// ReservedNamespaces no gitops Tenant may claim besides the system ones: the operator's own namespace.
	ReservedNamespaces []string
	// PlatformNamespaces, when set, are the only namespaces where a gitops Platform is deployed.
	PlatformNamespaces []string
	// KatastromaDefaultImage is the stage image of Platforms that name none.
	KatastromaDefaultImage string
	// MonitoringLabels are added to the ServiceMonitors controllers create (--monitoring-labels).
	MonitoringLabels map[string]string
	// AllowPrivilegedTenants lets a gitops Tenant ask for Pod Security level privileged.
	AllowPrivilegedTenants bool
	// GitopsRepositoryAllow are the prefixes every Platform's source stage may fetch repositories from despite its
	// fetch guard (--gitops-repository-allow-cidrs, already checked).
	GitopsRepositoryAllow []string
	// PeerDial is where connections to in-cluster peers go (QUARTET_DEV_DIAL_MAP, development and tests
	// only); nil dials every address as it is. Every HTTP client reaching a collector pod, an agent's MCP
	// Service or Prometheus uses PeerDial.Transport().
	PeerDial *devdial.Map
}

func (d Dependencies) options(name string) kube.ControllerOptions {
	return kube.ControllerOptions{MaxConcurrentReconciles: d.Concurrency[name]}
}

// Controllers returns every controller the operator knows, in a stable order. Each group lists its own in
// <group>.go.
func Controllers() []Controller {
	var all []Controller
	for _, group := range [][]Controller{fleetControllers(), gnmicControllers(), agentraxControllers(), gitopsControllers()} {
		all = append(all, group...)
	}
	return all
}

// Webhooks returns every admission webhook the operator serves, by kind.
func Webhooks() []Webhook {
	var all []Webhook
	for _, group := range [][]Webhook{fleetWebhooks(), gnmicWebhooks(), agentraxWebhooks(), gitopsWebhooks()} {
		all = append(all, group...)
	}
	return all
}

// Selection says which controllers run: those of the listed groups, narrowed to Controllers when that is set.
type Selection struct {
	Groups      []string
	Controllers []string
}

// Resolve returns the selected controllers, or an error naming any unknown group or controller.
func (s Selection) Resolve() ([]Controller, error) {
	all := Controllers()
	known := map[string]bool{}
	for _, c := range all {
		known[c.Name] = true
	}
	for _, g := range s.Groups {
		if !slices.Contains(Groups, g) {
			return nil, fmt.Errorf("unknown group %q: want some of %s", g, strings.Join(Groups, ","))
		}
	}
	for _, n := range s.Controllers {
		if !known[n] {
			names := make([]string, 0, len(known))
			for k := range known {
				names = append(names, k)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("unknown controller %q: want some of %s", n, strings.Join(names, ","))
		}
	}
	var selected []Controller
	names := map[string]bool{}
	for _, c := range all {
		if slices.Contains(s.Groups, c.Group) && (len(s.Controllers) == 0 || slices.Contains(s.Controllers, c.Name)) {
			selected = append(selected, c)
			names[c.Name] = true
		}
	}
	for _, c := range selected {
		for _, req := range c.Requires {
			if !names[req] {
				return nil, fmt.Errorf("controller %s requires controller %s, which is not selected: add %s to --controllers "+
					"(and its group to --groups), or leave --controllers empty", c.Name, req, req)
			}
		}
	}
	return selected, nil
}

// WebhooksFor returns the webhooks of every kind that one of the controllers reads.
func WebhooksFor(controllers []Controller) []Webhook {
	read := map[Kind]bool{}
	for _, c := range controllers {
		for _, k := range c.Reads {
			read[k] = true
		}
	}
	var hooks []Webhook
	for _, w := range Webhooks() {
		if read[w.Kind] {
			hooks = append(hooks, w)
		}
	}
	return hooks
}

// Setup registers the selected controllers and the webhooks of the kinds they read. With webhooks false the
// webhooks are left out (for a manager running without a webhook server).
func Setup(ctx context.Context, mgr ctrl.Manager, controllers []Controller, deps Dependencies, webhooks bool) error {
	for _, c := range controllers {
		if err := c.Setup(ctx, mgr, deps); err != nil {
			return fmt.Errorf("setting up controller %s: %w", c.Name, err)
		}
	}
	if !webhooks {
		return nil
	}
	for _, w := range WebhooksFor(controllers) {
		setup := w.Setup
		if w.SetupWithDeps != nil {
			setup = func(mgr ctrl.Manager) error { return w.SetupWithDeps(mgr, deps) }
		}
		if err := setup(mgr); err != nil {
			return fmt.Errorf("setting up the %s webhook: %w", w.Kind, err)
		}
	}
	return nil
}
