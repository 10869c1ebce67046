// Package provisioner server-side applies manifests as the tenant's provisioner ServiceAccount (Namespaces and
// CRDs first, waiting until CRDs are established), records the inventory after a complete success and hands the
// applied set to the pruner. It serves the ProvisionerService stage.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
	// ActionRepaired: the manifest was unchanged but the live object had drifted; the apply restored it.
	ActionRepaired = "repaired"
)

// Clients gives a stage the platform identity (leases, inventories, CRD establishment) and tenant impersonation
// (every read and write of tenant objects).
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
	// No groups: the API server gives an impersonated ServiceAccount its groups itself, while naming them would
	// need impersonate on groups, which a Platform does not grant.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
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
	// fence checks the lease before a write batch; it fails once a newer event holds it.
	fence func(ctx context.Context, gk schema.GroupKind) error
	// verifyTimeout is the source target's own verify timeout (nil: the stage's).
	verifyTimeout *time.Duration
	// target is the source target as read by the first lease check (its rename and claim annotations).
	target *corev1.ConfigMap
	// EstablishTimeout bounds the wait for a CRD.
	establishTimeout time.Duration

	mu       sync.Mutex
	pending  []string // CRDs not yet known to be established
	results  []*katastromav1.ObjectResult
	applied  []*katastromav1.ObjectRef
	failures int
	// live holds, per kind and namespace, each live object labelled with this source target (see liveObject).
	live map[liveKey]map[string]*unstructured.Unstructured
	// targetLabel is the source-target label of the applied objects, which the verify lists by.
	targetLabel string
	// claims are the objects the dry run refused because another target deploys them, by that target's name.
	claims map[string][]string
	// establishErr remembers a failed wait so the objects after it fail at once instead of waiting again each.
	establishErr error
}

// MaxBatch bounds a write batch: a long run of one kind is split, with a lease check before each part, so a lease
// lost in the middle of a thousand ConfigMaps stops the event after at most this many more writes (the applies
// already in flight still land).
const MaxBatch = 4 * applyWorkers

// applyWorkers bounds the applies in flight for one source target. kubectl applies one object after the other;
// each apply mostly waits for the API server's storage write, so a few in flight cut the wall time of a large
// set severalfold without loading the server much more.
const applyWorkers = 8

// applyAll applies objs in their order with a barrier between kinds: objects of one kind never need each other,
// while a kind may need an earlier one (a Namespace, a CRD, a ServiceAccount a workload runs as), so a run of
// consecutive objects of the same kind is applied concurrently and the next kind starts when the run finished.
// Each run is a write batch: the lease is checked before it, so once a newer event took the source target over
// this one stops before writing again, superseded.
//
// Nothing is written before the dry run of the whole set passed (dryrun.go) and the objects about to be written
// for the first time are recorded (recordIntent).
func (a *applier) applyAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	plan, err := a.dryRunAll(ctx, objs)
	a.reportClaims(ctx)
	if err != nil {
		return err
	}
	if err := a.recordIntent(ctx, plan.writes); err != nil {
		return err
	}
	sem := make(chan struct{}, applyWorkers)
	for i := 0; i < len(objs); {
		if len(plan.deferred) > 0 && !orderer.IsFoundation(objs[i]) {
			// The commit's Namespaces and CRDs are applied: judge what needed them before writing anything else.
			// A failed wait fails those objects in apply, naming the CRD.
			if a.waitEstablished(ctx) == nil {
				if err := a.dryRunDeferred(ctx, plan.deferred, len(objs)); err != nil {
					return err
				}
			}
			plan.deferred = nil
		}
		gk := objs[i].GroupVersionKind().GroupKind()
		j := i + 1
		for j < len(objs) && objs[j].GroupVersionKind().GroupKind() == gk && j-i < MaxBatch {
			j++
		}
		// The lease check guards writes. A run the dry run found unchanged writes nothing (apply judges each
		// object on the same live list), so it needs none: a no-change push of 1,000 objects would otherwise
		// read the source target 32 times for nothing. The inventory record after the applies is fenced anyway.
		if slices.ContainsFunc(objs[i:j], func(u *unstructured.Unstructured) bool { return plan.writing[u] }) {
			if err := a.fence(ctx, gk); err != nil {
				return err
			}
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
	return nil
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
		if l := u.GetLabels()[pipeline.LabelSourceTarget]; l != "" {
			a.targetLabel = l
		}
		if u.GetKind() == "CustomResourceDefinition" {
			a.pending = append(a.pending, u.GetName())
		}
	}
	a.results = append(a.results, r)
	return r
}

// prepare resolves u's kind, puts it in its namespace (the tenant namespace when it names none; none for a
// cluster-scoped kind) and reads its live object. unchanged is true when the live object carries the same manifest
// hash and every field of the manifest (drift check): nothing to write. An object edited behind the pipeline's back
// is therefore written again even though its manifest did not change.
func (a *applier) prepare(ctx context.Context, u *unstructured.Unstructured) (live *unstructured.Unstructured,
	hashMatches, unchanged bool, err error) {
	mapping, err := a.clients.Mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return nil, false, false, fmt.Errorf("resolving %s: %w", u.GroupVersionKind(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(a.pc.Namespace)
		}
	} else {
		u.SetNamespace("")
	}
	if live, err = a.liveObject(ctx, u); err != nil {
		return nil, false, false, fmt.Errorf("reading the live objects: %w", err)
	}
	hashMatches = live != nil && live.GetAnnotations()[pipeline.AnnotationHash] != "" &&
		live.GetAnnotations()[pipeline.AnnotationHash] == u.GetAnnotations()[pipeline.AnnotationHash]
	return live, hashMatches, hashMatches && Contains(live.Object, u.Object), nil
}

// serverSideApply applies u as the tenant's provisioner and returns what the API server answered.
func (a *applier) serverSideApply(ctx context.Context, u *unstructured.Unstructured, opts ...client.ApplyOption) (*unstructured.Unstructured, error) {
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	applied := u.DeepCopy()
	opts = append([]client.ApplyOption{client.FieldOwner(pipeline.FieldManager), client.ForceOwnership}, opts...)
	return applied, a.as.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), opts...)
}

// apply server-side applies u unless it is unchanged (prepare).
func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured) (string, error) {
	if !orderer.IsFoundation(u) {
		if err := a.waitEstablished(ctx); err != nil {
			return ActionFailed, err
		}
	}
	live, hashMatches, unchanged, err := a.prepare(ctx, u)
	if err != nil {
		return ActionFailed, err
	}
	if unchanged {
		// Same manifest and every field of it still live: nothing to repair, nothing to write.
		return ActionUnchanged, nil
	}
	applied, err := a.serverSideApply(ctx, u)
	if err != nil {
		return ActionFailed, err
	}
	// Only a write that moved the resourceVersion changed anything: a field the comparison could not match
	// (a defaulted or normalised value) applies as a no-op.
	switch {
	case live == nil || applied.GetResourceVersion() == "":
		return ActionApplied, nil
	case applied.GetResourceVersion() == live.GetResourceVersion():
		return ActionUnchanged, nil
	case hashMatches:
		return ActionRepaired, nil // the manifest did not change, the live object did: drift undone
	}
	return ActionApplied, nil
}

// Contains reports whether every field of want is in have with an equal value: maps by key (extra keys in have
// are someone else's, or the API server's defaults), lists element by element, numbers by value. Metadata is
// compared by labels and annotations only, without the commit annotation.
func Contains(have, want map[string]any) bool {
	for k, w := range want {
		if k == "metadata" {
			wm, _ := w.(map[string]any)
			hm, _ := have[k].(map[string]any)
			for _, f := range []string{"labels", "annotations"} {
				wf, ok := wm[f].(map[string]any)
				if !ok {
					continue
				}
				if f == "annotations" {
					// The commit annotation changes with every commit and is not in the manifest hash: a new
					// commit of an unchanged manifest is no drift, and writing it would make every push write
					// every object.
					wf = maps.Clone(wf)
					delete(wf, pipeline.AnnotationCommit)
				}
				if !containsValue(hm[f], wf) {
					return false
				}
			}
			continue
		}
		if k == "status" {
			continue
		}
		if !containsValue(have[k], w) {
			return false
		}
	}
	return true
}

func containsValue(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, wv := range w {
			if !containsValue(h[k], wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return len(w) == 0 && have == nil
		}
		for i := range w {
			if !containsValue(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	if wn, ok := number(want); ok {
		hn, ok := number(have)
		return ok && hn == wn
	}
	return have == want
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
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

// liveObject returns u's live object, nil when it does not exist, is being deleted or is not labelled with u's
// source target (liveLabelled).
func (a *applier) liveObject(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	target := u.GetLabels()[pipeline.LabelSourceTarget]
	if target == "" {
		return nil, nil // not labelled by the labeler: always applied
	}
	o, err := a.liveLabelled(ctx, u)
	if err != nil || o == nil || o.GetLabels()[pipeline.LabelSourceTarget] != target {
		return nil, err
	}
	return o, nil
}

// liveLabelled returns u's live object when it carries any source-target label (this target's or another's), nil
// otherwise. The first object of a kind and namespace lists all of them with the label: one request per kind
// instead of a read per object, which on a large set is as many requests as the applies themselves. The list runs
// under mu, so concurrent objects of the kind wait for it instead of listing again.
func (a *applier) liveLabelled(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	key := liveKey{gvk: u.GroupVersionKind(), namespace: u.GetNamespace()}
	a.mu.Lock()
	defer a.mu.Unlock()
	objs, ok := a.live[key]
	if !ok {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(key.gvk.GroupVersion().WithKind(key.gvk.Kind + "List"))
		opts := []client.ListOption{client.HasLabels{pipeline.LabelSourceTarget}}
		if key.namespace != "" {
			opts = append(opts, client.InNamespace(key.namespace))
		}
		// As the tenant: the Platform's identity cannot read tenant kinds (Secrets, custom resources).
		if err := a.as.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		objs = make(map[string]*unstructured.Unstructured, len(list.Items))
		for i := range list.Items {
			if o := &list.Items[i]; o.GetDeletionTimestamp() == nil {
				objs[o.GetName()] = o
			}
		}
		if a.live == nil {
			a.live = map[liveKey]map[string]*unstructured.Unstructured{}
		}
		a.live[key] = objs
	}
	return objs[u.GetName()], nil
}
