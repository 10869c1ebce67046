package gnmic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
)

// targetControllerUIDField indexes Targets by the UID of their controller owner reference.
const targetControllerUIDField = "metadata.ownerReferences.controllerUID"

// applyWorkers is how many Target writes one run has in flight; the client's QPS/burst still bounds the rate.
const applyWorkers = 16

// FieldManager is the server-side apply field manager of a TargetSource's Target writes.
func FieldManager(ts string) string {
	const prefix = "targetsource.operator.gnmic.dev/"
	if len(prefix)+len(ts) <= 128 {
		return prefix + ts
	}
	sum := sha256.Sum256([]byte(ts))
	return prefix + ts[:128-len(prefix)-9] + "-" + hex.EncodeToString(sum[:4])
}

// converged is the outcome of applying a plan.
type converged struct {
	// managedBefore is how many Targets this TargetSource managed when the run started.
	managedBefore int
	// managedAfter is how many it manages now.
	managedAfter int
	conflicted   []string
	applied      int
	applyErrors  map[string]error
	deleted      int
	deleteErrors []error
	guard        string
	// unnamed is how many invalid devices had no name (they hold deletions: GuardInvalidDevices).
	unnamed int
}

func controllerUID(o metav1.Object) types.UID {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.UID
	}
	return ""
}

// isManaged is the ownership rule: the TargetSource label AND a controller owner reference with its UID.
func isManaged(t *gnmicv1alpha1.Target, ts *gnmicv1alpha1.TargetSource) bool {
	return t.Labels[gnmicv1alpha1.LabelTargetSource] == targetsource.SanitizeLabelValue(ts.Name) && controllerUID(t) == ts.UID
}

// upToDate compares the owned fields of a cached Target with the desired ones, so drift is repaired without any
// stored input hash.
func upToDate(t *gnmicv1alpha1.Target, d *targetsource.Desired, ts *gnmicv1alpha1.TargetSource) bool {
	if t.Spec.Address != d.Address || t.Spec.Profile != d.Profile {
		return false
	}
	for k, v := range d.Labels {
		if cur, ok := t.Labels[k]; !ok || cur != v {
			return false
		}
	}
	for k, v := range d.Annotations {
		if cur, ok := t.Annotations[k]; !ok || cur != v {
			return false
		}
	}
	for k := range t.Annotations {
		if strings.HasPrefix(k, gnmicv1alpha1.AnnotationLabelPrefix) {
			if _, ok := d.Annotations[k]; !ok {
				return false
			}
		}
	}
	ref := metav1.GetControllerOf(t)
	return ref != nil && ref.UID == ts.UID && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
}

// applyObject is the apply configuration of a Target: only the owned fields.
func applyObject(ts *gnmicv1alpha1.TargetSource, d *targetsource.Desired) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"address": d.Address, "profile": d.Profile},
	}}
	u.SetAPIVersion(gnmicv1alpha1.GroupVersion.String())
	u.SetKind("Target")
	u.SetNamespace(ts.Namespace)
	u.SetName(d.Name)
	u.SetLabels(d.Labels)
	u.SetAnnotations(d.Annotations)
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: gnmicv1alpha1.GroupVersion.String(), Kind: "TargetSource", Name: ts.Name, UID: ts.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	return u
}

// converge applies the plan: creates and updates what differs from the cache, leaves Targets it does not own
// alone, and deletes managed Targets no longer wanted unless a prune guard holds.
func (r *TargetSourceReconciler) converge(ctx context.Context, ts *gnmicv1alpha1.TargetSource, plan *targetsource.Plan,
	guardIn targetsource.GuardInput, keep map[string]bool) (converged, error) {
	owned := &gnmicv1alpha1.TargetList{}
	if err := r.List(ctx, owned, client.InNamespace(ts.Namespace),
		client.MatchingFields{targetControllerUIDField: string(ts.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return converged{}, err
	}
	byName := make(map[string]*gnmicv1alpha1.Target, len(owned.Items))
	var out converged
	for i := range owned.Items {
		t := &owned.Items[i]
		byName[t.Name] = t
		if isManaged(t, ts) {
			out.managedBefore++
		}
	}
	wanted := make(map[string]bool, len(plan.Targets))
	var toApply []write
	for i := range plan.Targets {
		d := &plan.Targets[i]
		wanted[d.Name] = true
		if t, ok := byName[d.Name]; ok {
			if !upToDate(t, d, ts) {
				toApply = append(toApply, write{desired: d, uid: t.UID})
			}
			continue
		}
		other := &gnmicv1alpha1.Target{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: d.Name}, other)
		switch {
		case err == nil:
			out.conflicted = append(out.conflicted, d.Name)
		case apierrors.IsNotFound(err):
			toApply = append(toApply, write{desired: d, create: true})
		default:
			return converged{}, err
		}
	}
	res := r.applyAll(ctx, ts, toApply)
	out.applyErrors = res.errs
	out.applied = res.written
	out.conflicted = append(out.conflicted, res.conflicted...)
	sort.Strings(out.conflicted)

	var stale []*gnmicv1alpha1.Target
	for _, t := range owned.Items {
		if wanted[t.Name] || !isManaged(&t, ts) {
			continue
		}
		if keep[t.Name] {
			out.managedAfter++ // an invalid device the inventory still lists keeps its Target
			continue
		}
		stale = append(stale, &t)
	}
	for _, d := range plan.Targets {
		if _, failed := out.applyErrors[d.Name]; !failed && !contains(out.conflicted, d.Name) {
			out.managedAfter++
		}
	}
	guardIn.Managed, guardIn.Deletions = out.managedBefore, len(stale)
	out.unnamed = guardIn.Unnamed
	out.guard = targetsource.PruneGuard(guardIn)
	if out.guard != "" {
		out.managedAfter += len(stale)
		return out, nil
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].Name < stale[j].Name })
	for _, t := range stale {
		uid := t.UID
		err := r.Delete(ctx, &gnmicv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}},
			client.Preconditions{UID: &uid})
		switch {
		case err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			out.deleted++
		default:
			out.deleteErrors = append(out.deleteErrors, err)
			out.managedAfter++
		}
	}
	return out, nil
}

// createOnly is the resourceVersion sent with the apply of a name the cache has not seen. The API server checks
// a resourceVersion in an apply against an existing object (409 Conflict when it differs) and ignores it when the
// apply creates the object; no stored object has resourceVersion 1 (etcd revision 1 is the empty store, every
// write gets a later one), so the apply creates the Target or fails. Without it, a Target someone else created
// inside the cache-lag window would be taken over by the forced apply.
const createOnly = "1"

// write is one Target apply: create marks a name absent from the cache, applied create-only; uid is the UID of
// the cached Target an update is meant for.
type write struct {
	desired *targetsource.Desired
	create  bool
	uid     types.UID
}

type applyResult struct {
	written    int
	errs       map[string]error
	conflicted []string
}

// applyAll server-side applies the Targets with a few writes in flight, and returns the failures by name and
// the names found held by Targets this TargetSource does not manage.
func (r *TargetSourceReconciler) applyAll(ctx context.Context, ts *gnmicv1alpha1.TargetSource, todo []write) applyResult {
	res := applyResult{errs: map[string]error{}}
	var mu sync.Mutex
	work := make(chan write)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(todo)) {
		wg.Go(func() {
			for w := range work {
				written, conflict, err := r.applyOne(ctx, ts, w)
				mu.Lock()
				switch {
				case err != nil:
					res.errs[w.desired.Name] = err
				case conflict:
					res.conflicted = append(res.conflicted, w.desired.Name)
				case written:
					res.written++
				}
				mu.Unlock()
			}
		})
	}
	for _, w := range todo {
		work <- w
	}
	close(work)
	wg.Wait()
	return res
}

// applyOne applies one Target. A create-only apply carries resourceVersion createOnly and an update the cached
// Target's UID, so neither can land on an object the cache does not know: the API server refuses a create-only
// apply when the name exists (409) and an apply whose UID differs from the stored object's (422, uid
// immutable) or names an object that is gone (409). Each refusal is resolved with a live read: someone else's
// Target is a conflict and left alone; this TargetSource's own (written by a previous run the cache has not
// caught up with) is applied normally when it differs; a Target deleted since the cache saw it is created
// again, create-only.
func (r *TargetSourceReconciler) applyOne(ctx context.Context, ts *gnmicv1alpha1.TargetSource, w write) (written, conflict bool, err error) {
	u := applyObject(ts, w.desired)
	switch {
	case w.create:
		u.SetResourceVersion(createOnly)
	case w.uid != "":
		u.SetUID(w.uid)
	}
	err = r.applyTarget(ctx, ts, u)
	refused := apierrors.IsConflict(err) || (!w.create && uidChanged(err))
	if !refused {
		return err == nil, false, err
	}
	live := &gnmicv1alpha1.Target{}
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: w.desired.Name}, live)
	switch {
	case apierrors.IsNotFound(err) && !w.create:
		return r.applyOne(ctx, ts, write{desired: w.desired, create: true})
	case err != nil:
		// Gone again (deleted in between): the next run creates it.
		return false, false, err
	case controllerUID(live) != ts.UID:
		return false, true, nil
	case upToDate(live, w.desired, ts):
		return false, false, nil
	}
	u = applyObject(ts, w.desired)
	u.SetUID(live.UID)
	err = r.applyTarget(ctx, ts, u)
	return err == nil, false, err
}

// uidChanged tells the API server's refusal of an apply whose metadata.uid is not the stored object's.
func uidChanged(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// applyTarget sends one forced apply as the TargetSource's field manager, through the Writer when there is one
// (the answer is not decoded), else through the client.
func (r *TargetSourceReconciler) applyTarget(ctx context.Context, ts *gnmicv1alpha1.TargetSource, u *unstructured.Unstructured) error {
	if r.Writer != nil {
		return r.Writer.Apply(ctx, u, FieldManager(ts.Name))
	}
	return r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager(ts.Name)), client.ForceOwnership)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
