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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// first other object it waits for every CRD applied so far to be established. add is safe for concurrent use
// (see applyAll); mu guards everything below it.
type applier struct {
	clients *Clients
	as      client.Client
	pc      pipeline.Context
	// EstablishTimeout bounds the wait for a CRD.
	establishTimeout time.Duration

	mu       sync.Mutex
	pending  []string // CRDs not yet known to be established
	results  []*katastromav1.ObjectResult
	applied  []*katastromav1.ObjectRef
	failures int
	// live holds, per kind and namespace, the manifest hash of each live object labelled with this source
	// target (see liveHash).
	live map[liveKey]map[string]string
	// establishErr remembers a failed wait so the objects after it fail at once instead of waiting again each.
	establishErr error
}

// applyWorkers bounds the applies in flight for one source target. kubectl applies one object after the other;
// each apply mostly waits for the API server's storage write, so a few in flight cut the wall time of a large
// set severalfold without loading the server much more.
const applyWorkers = 8

// applyAll applies objs in their order with a barrier between kinds: objects of one kind never need each other,
// while a kind may need an earlier one (a Namespace, a CRD, a ServiceAccount a workload runs as), so a run of
// consecutive objects of the same kind is applied concurrently and the next kind starts when the run finished.
func (a *applier) applyAll(ctx context.Context, objs []*unstructured.Unstructured) {
	sem := make(chan struct{}, applyWorkers)
	for i := 0; i < len(objs); {
		gk := objs[i].GroupVersionKind().GroupKind()
		j := i + 1
		for j < len(objs) && objs[j].GroupVersionKind().GroupKind() == gk {
			j++
		}
		var wg sync.WaitGroup
		for _, u := range objs[i:j] {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				a.add(ctx, u)
			})
		}
		wg.Wait()
		i = j
	}
}

// add applies one object and records and returns its result.
func (a *applier) add(ctx context.Context, u *unstructured.Unstructured) *katastromav1.ObjectResult {
	action, err := a.apply(ctx, u)
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &katastromav1.ObjectResult{Object: pipeline.Ref(u), Action: action}
	if err != nil {
		r.Error = err.Error()
		a.failures++
	} else {
		a.applied = append(a.applied, r.GetObject())
		if u.GetKind() == "CustomResourceDefinition" {
			a.pending = append(a.pending, u.GetName())
		}
	}
	a.results = append(a.results, r)
	return r
}

// apply server-side applies u unless its live object already carries the same manifest hash.
func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured) (string, error) {
	if !orderer.IsFoundation(u) {
		if err := a.waitEstablished(ctx); err != nil {
			return ActionFailed, err
		}
	}
	mapping, err := a.clients.Mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return ActionFailed, fmt.Errorf("resolving %s: %w", u.GroupVersionKind(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(a.pc.Namespace)
		}
	} else {
		u.SetNamespace("")
	}
	hash, err := a.liveHash(ctx, u)
	switch {
	case err != nil:
		return ActionFailed, fmt.Errorf("reading the live objects: %w", err)
	case hash != "" && hash == u.GetAnnotations()[pipeline.AnnotationHash]:
		return ActionUnchanged, nil
	}
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	if err := a.as.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(pipeline.FieldManager),
		client.ForceOwnership); err != nil {
		return ActionFailed, err
	}
	return ActionApplied, nil
}

// waitEstablished waits until every pending CRD reports Established and its kind resolves. It holds mu
// throughout: concurrent callers need the same answer.
func (a *applier) waitEstablished(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 || a.establishErr != nil {
		return a.establishErr
	}
	timeout := a.establishTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	for _, name := range a.pending {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			crd, err := a.readCRD(ctx, name)
			if last = err; err != nil {
				return false, nil
			}
			if !established(crd) {
				last = errors.New("not established yet")
				return false, nil
			}
			// The shared dynamic mapper reloads a group it does not know on a miss, so once discovery serves
			// the new kind it resolves without rebuilding the mapper or the clients.
			_, last = a.clients.Mapper.RESTMapping(schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind})
			return last == nil, nil
		})
		if err != nil {
			a.establishErr = fmt.Errorf("CRD %s did not become established: %w", name, errors.Join(err, last))
			return a.establishErr
		}
	}
	a.pending = nil
	return nil
}

// crdGVK is read as unstructured: the stage's scheme is the caller's (cmd/katastroma passes the operator's) and
// need not register apiextensions, and a typed Get would then fail with "no kind is registered" on every poll.
var crdGVK = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// readCRD reads a CRD with the platform identity (the tenant identities have no read verbs).
func (a *applier) readCRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(crdGVK)
	if err := a.clients.Platform.Get(ctx, types.NamespacedName{Name: name}, u); err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

type liveKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// liveHash returns the manifest-hash annotation of u's live object, "" when it does not exist, is being deleted or
// is not labelled with u's source target. The first object of a kind and namespace lists the metadata of all of
// them with the source-target label: one request per kind instead of a read per object, which on a large set
// is as many requests as the applies themselves. The list runs under mu, so concurrent objects of the kind
// wait for it instead of listing again.
func (a *applier) liveHash(ctx context.Context, u *unstructured.Unstructured) (string, error) {
	target := u.GetLabels()[pipeline.LabelSourceTarget]
	if target == "" {
		return "", nil // not labelled by the labeler: always applied
	}
	key := liveKey{gvk: u.GroupVersionKind(), namespace: u.GetNamespace()}
	a.mu.Lock()
	defer a.mu.Unlock()
	hashes, ok := a.live[key]
	if !ok {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(key.gvk.GroupVersion().WithKind(key.gvk.Kind + "List"))
		opts := []client.ListOption{client.MatchingLabels{pipeline.LabelSourceTarget: target}}
		if key.namespace != "" {
			opts = append(opts, client.InNamespace(key.namespace))
		}
		if err := a.clients.Platform.List(ctx, list, opts...); err != nil {
			return "", err
		}
		hashes = make(map[string]string, len(list.Items))
		for _, o := range list.Items {
			if o.DeletionTimestamp == nil {
				hashes[o.Name] = o.Annotations[pipeline.AnnotationHash]
			}
		}
		if a.live == nil {
			a.live = map[liveKey]map[string]string{}
		}
		a.live[key] = hashes
	}
	return hashes[u.GetName()], nil
}
