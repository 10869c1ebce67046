// Package provisioner server-side applies manifests as the tenant's provisioner ServiceAccount (Namespaces and
// CRDs first, waiting until CRDs are established), records the inventory after a complete success and hands the
// applied set to the pruner. It serves the ProvisionerService stage.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/orderer"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Actions reported per object.
const (
	ActionApplied   = "applied"
	ActionUnchanged = "unchanged"
	ActionFailed    = "failed"
	ActionDeleted   = "deleted"
	ActionSkipped   = "skipped"
)

// Clients gives a stage the platform identity (reads, inventory, lease checks) and tenant impersonation.
type Clients struct {
	// Platform is the stage's own identity.
	Platform client.Client
	// Config is the stage's rest config, copied for impersonation.
	Config *rest.Config
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper

	mu     sync.Mutex
	tenant map[string]client.Client
}

// NewClients builds the platform client with a dynamic REST mapper shared by every impersonated client.
func NewClients(cfg *rest.Config, scheme *runtime.Scheme) (*Clients, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutilMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	return &Clients{Platform: c, Config: cfg, Scheme: scheme, Mapper: mapper, tenant: map[string]client.Client{}}, nil
}

// As returns a client impersonating the ServiceAccount sa of namespace ns (cached per identity).
func (c *Clients) As(ns, sa string) (client.Client, error) {
	user := "system:serviceaccount:" + ns + ":" + sa
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.tenant[user]; ok {
		return cl, nil
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme, Mapper: c.Mapper})
	if err != nil {
		return nil, err
	}
	c.tenant[user] = cl
	return cl, nil
}

// applier applies objects in the order received: foundations (Namespaces, CRDs) as they come, and before the
// first other object it waits for every CRD applied so far to be established.
type applier struct {
	clients  *Clients
	as       client.Client
	pc       pipeline.Context
	pending  []string // CRDs not yet known to be established
	results  []*katastromav1.ObjectResult
	applied  []*katastromav1.ObjectRef
	failures int
	// EstablishTimeout bounds the wait for a CRD.
	establishTimeout time.Duration
	// mapper and platform resolve kinds; after new CRDs they are rebuilt so the new kinds resolve.
	mapper   meta.RESTMapper
	platform client.Client
}

// refresh rebuilds the mapper and the clients of this applier, so kinds of CRDs applied in this run resolve.
func (a *applier) refresh() error {
	hc, err := rest.HTTPClientFor(a.clients.Config)
	if err != nil {
		return err
	}
	m, err := apiutilMapper(a.clients.Config, hc)
	if err != nil {
		return err
	}
	p, err := client.New(a.clients.Config, client.Options{Scheme: a.clients.Scheme, Mapper: m, HTTPClient: hc})
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(a.clients.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + a.pc.Namespace + ":" + ServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + a.pc.Namespace, "system:authenticated"}}
	as, err := client.New(cfg, client.Options{Scheme: a.clients.Scheme, Mapper: m})
	if err != nil {
		return err
	}
	a.mapper, a.platform, a.as = m, p, as
	return nil
}

func (a *applier) result(u *unstructured.Unstructured, action string, err error) *katastromav1.ObjectResult {
	r := &katastromav1.ObjectResult{Object: pipeline.Ref(u), Action: action}
	if err != nil {
		r.Error = err.Error()
		a.failures++
	}
	a.results = append(a.results, r)
	return r
}

// add applies one object and returns its result.
func (a *applier) add(ctx context.Context, u *unstructured.Unstructured) *katastromav1.ObjectResult {
	if !orderer.IsFoundation(u) {
		if err := a.waitEstablished(ctx); err != nil {
			return a.result(u, ActionFailed, err)
		}
	}
	mapping, err := a.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return a.result(u, ActionFailed, fmt.Errorf("resolving %s: %w", u.GroupVersionKind(), err))
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(a.pc.Namespace)
		}
	} else {
		u.SetNamespace("")
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err = a.platform.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, live)
	switch {
	case err == nil && live.GetAnnotations()[pipeline.AnnotationHash] == u.GetAnnotations()[pipeline.AnnotationHash] &&
		live.GetAnnotations()[pipeline.AnnotationHash] != "" && live.GetDeletionTimestamp() == nil:
		a.applied = append(a.applied, pipeline.Ref(u))
		a.trackCRD(u)
		return a.result(u, ActionUnchanged, nil)
	case err != nil && !apierrors.IsNotFound(err):
		return a.result(u, ActionFailed, fmt.Errorf("reading the live object: %w", err))
	}
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	if err := a.as.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(pipeline.FieldManager),
		client.ForceOwnership); err != nil {
		return a.result(u, ActionFailed, err)
	}
	a.applied = append(a.applied, pipeline.Ref(u))
	a.trackCRD(u)
	return a.result(u, ActionApplied, nil)
}

func (a *applier) trackCRD(u *unstructured.Unstructured) {
	if u.GetKind() == "CustomResourceDefinition" {
		a.pending = append(a.pending, u.GetName())
	}
}

// waitEstablished waits until every pending CRD reports Established and its kind resolves.
func (a *applier) waitEstablished(ctx context.Context) error {
	if len(a.pending) == 0 {
		return nil
	}
	timeout := a.establishTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	for _, name := range a.pending {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if last = a.clients.Platform.Get(ctx, types.NamespacedName{Name: name}, crd); last != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			last = errors.New("not established yet")
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s did not become established: %w", name, errors.Join(err, last))
		}
	}
	a.pending = nil
	return a.refresh()
}
