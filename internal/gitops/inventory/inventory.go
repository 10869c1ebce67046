// Package inventory stores, per source target, the objects the pipeline applied (and at which commit) and the
// objects still waiting to be pruned, in a ConfigMap next to the source target. It also checks the source target's
// lease, which the provisioner and pruner do before every write.
package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Inventory is what the pipeline knows it owns for one source target.
type Inventory struct {
	// Commit is the commit whose objects were last applied successfully.
	Commit string
	// Objects is the set applied at Commit.
	Objects []*katastromav1.ObjectRef
	// Prune holds objects of earlier sets that are not deleted yet.
	Prune []*katastromav1.ObjectRef
}

// Format is the current inventory format, stored under the "format" key. Entries are keyed by group, kind,
// namespace and name (pipeline.RefKey); the version is kept only to address the object when pruning. The first
// format (no "format" key) stored apiVersion per entry and keyed by it, so an apiVersion change put the object
// itself on the prune list; parse reads it and the next write stores the current format.
const Format = "2"

// entry is one object of the current format.
type entry struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// legacyEntry is one object of the first format.
type legacyEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// Name is the inventory ConfigMap of a source target.
func Name(sourceTarget string) string { return "katastroma-inventory-" + sourceTarget }

func encode(refs []*katastromav1.ObjectRef) string {
	out := make([]entry, 0, len(refs))
	for _, r := range Sorted(refs) {
		gv, _ := schema.ParseGroupVersion(r.GetApiVersion())
		out = append(out, entry{gv.Group, gv.Version, r.GetKind(), r.GetNamespace(), r.GetName()})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func decode(s, format string) ([]*katastromav1.ObjectRef, error) {
	if s == "" {
		return nil, nil
	}
	var out []*katastromav1.ObjectRef
	switch format {
	case Format:
		var in []entry
		if err := json.Unmarshal([]byte(s), &in); err != nil {
			return nil, err
		}
		for _, e := range in {
			gv := schema.GroupVersion{Group: e.Group, Version: e.Version}
			out = append(out, &katastromav1.ObjectRef{ApiVersion: gv.String(), Kind: e.Kind,
				Namespace: e.Namespace, Name: e.Name})
		}
	case "":
		var in []legacyEntry
		if err := json.Unmarshal([]byte(s), &in); err != nil {
			return nil, err
		}
		for _, e := range in {
			out = append(out, &katastromav1.ObjectRef{ApiVersion: e.APIVersion, Kind: e.Kind, Namespace: e.Namespace,
				Name: e.Name})
		}
	default:
		return nil, fmt.Errorf("unknown inventory format %q (this version reads %q and the first format)", format, Format)
	}
	for i, r := range out {
		gv, err := schema.ParseGroupVersion(r.GetApiVersion())
		switch {
		case err != nil:
			return nil, fmt.Errorf("entry %d: %w", i, err)
		case gv.Version == "" || r.GetKind() == "" || r.GetName() == "":
			return nil, fmt.Errorf("entry %d lacks a version, kind or name", i)
		}
	}
	return out, nil
}

// parse reads an inventory ConfigMap's data in either format. An object listed under objects is not also a prune
// candidate: the first format could hold it in both under two versions.
func parse(data map[string]string) (*Inventory, error) {
	inv := &Inventory{Commit: data["commit"]}
	var err error
	if inv.Objects, err = decode(data["objects"], data["format"]); err != nil {
		return nil, fmt.Errorf("objects: %w", err)
	}
	prune, err := decode(data["prune"], data["format"])
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	inv.Objects = Sorted(inv.Objects)
	inv.Prune = Minus(prune, inv.Objects)
	return inv, nil
}

// format is the ConfigMap data of inv in the current format.
func format(inv *Inventory) map[string]string {
	return map[string]string{"format": Format, "commit": inv.Commit, "objects": encode(inv.Objects),
		"prune": encode(inv.Prune)}
}

// Sorted returns refs in key order without duplicates.
func Sorted(refs []*katastromav1.ObjectRef) []*katastromav1.ObjectRef {
	seen := map[string]*katastromav1.ObjectRef{}
	for _, r := range refs {
		seen[pipeline.RefKey(r)] = r
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*katastromav1.ObjectRef, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out
}

// Minus returns the refs of a that are not in b.
func Minus(a, b []*katastromav1.ObjectRef) []*katastromav1.ObjectRef {
	in := map[string]bool{}
	for _, r := range b {
		in[pipeline.RefKey(r)] = true
	}
	var out []*katastromav1.ObjectRef
	for _, r := range Sorted(a) {
		if !in[pipeline.RefKey(r)] {
			out = append(out, r)
		}
	}
	return out
}

// Read returns the inventory of a source target (empty when it has none) and its ConfigMap (nil when absent).
func Read(ctx context.Context, c client.Client, namespace, sourceTarget string) (*Inventory, *corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: Name(sourceTarget)}, cm)
	if apierrors.IsNotFound(err) {
		return &Inventory{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the inventory: %w", err)
	}
	inv, err := parse(cm.Data)
	if err != nil {
		return nil, nil, fmt.Errorf("inventory %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return inv, cm, nil
}

// write stores inv, creating the ConfigMap or updating cm with its resourceVersion as a precondition.
func write(ctx context.Context, c client.Client, namespace, sourceTarget string, cm *corev1.ConfigMap, inv *Inventory) error {
	data := format(inv)
	if cm == nil {
		cm = &corev1.ConfigMap{}
		cm.Namespace, cm.Name = namespace, Name(sourceTarget)
		cm.Labels = map[string]string{pipeline.LabelType: pipeline.TypeInventory,
			pipeline.LabelSourceTarget: sourceTarget}
		cm.Data = data
		return c.Create(ctx, cm)
	}
	cm = cm.DeepCopy()
	cm.Data = data
	return c.Update(ctx, cm)
}

// Next computes the inventory to record from the stored one (empty when there is none; exists says whether its
// ConfigMap exists). It returns nil to record nothing and remove to delete the inventory ConfigMap.
type Next func(old *Inventory, exists bool) (next *Inventory, remove bool)

// recordAttempts bounds the retries of Record when another writer raced it.
const recordAttempts = 5

// Record writes the inventory of a source target for the holder of leaseID, fenced by the lease:
//
//  1. it reads the inventory (resourceVersion I) and then the source target (resourceVersion L), which must
//     still carry leaseID;
//  2. it updates the source target at L (a precondition) with the deployed commit: this fails if anyone took
//     the lease since step 1;
//  3. it writes the inventory at I.
//
// A newer event takes the lease after step 2 or not at all, and records after that, so either its inventory
// write conflicts with ours (we retry and see the lease lost) or it reads ours and builds on it. An older
// event can therefore never record over a newer one. A lost lease returns *ErrLeaseLost.
//
// marks are annotations written on the source target with the same update (reports for its owner).
func Record(ctx context.Context, c client.Client, namespace, sourceTarget, leaseID string, next Next,
	marks map[string]string) error {
	var last error
	for range recordAttempts {
		old, cm, err := Read(ctx, c, namespace, sourceTarget)
		if err != nil {
			return err
		}
		lease, err := checkLease(ctx, c, namespace, sourceTarget, leaseID)
		if err != nil {
			return err
		}
		inv, remove := next(old, cm != nil)
		lease = lease.DeepCopy()
		switch {
		case remove:
			delete(lease.Annotations, pipeline.AnnotationDeployed)
		case inv != nil && inv.Commit != "":
			// A record before the first deploy (the provisioner's intent) has no commit to name yet.
			lease.Annotations[pipeline.AnnotationDeployed] = inv.Commit
		}
		for k, v := range marks {
			lease.Annotations[k] = v
		}
		// An unchanged object is not written, but the precondition is still checked.
		if err := c.Update(ctx, lease); err != nil {
			if last = err; apierrors.IsConflict(err) {
				continue
			}
			return fmt.Errorf("fencing the record on the source target: %w", err)
		}
		switch {
		case remove && cm != nil:
			err = c.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		case inv != nil && !remove:
			err = write(ctx, c, namespace, sourceTarget, cm, inv)
		}
		if last = err; err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("writing the inventory: %w", err)
		}
	}
	return fmt.Errorf("writing the inventory: %d attempts raced other writers: %w", recordAttempts, last)
}

// ErrLeaseLost is returned when a newer processor holds the source target's lease. Held and Want are lease
// references (pipeline.LeaseRef), never lease IDs: the error reaches spans and the source target.
type ErrLeaseLost struct{ Held, Want string }

func (e *ErrLeaseLost) Error() string {
	return fmt.Sprintf("lease lost: the source target's lease is %q, this processor holds %q", e.Held, e.Want)
}

// CheckLease fails with *ErrLeaseLost unless the source target's lease ID is leaseID. The stages call it before
// every write batch.
func CheckLease(ctx context.Context, c client.Client, namespace, sourceTarget, leaseID string) error {
	_, err := checkLease(ctx, c, namespace, sourceTarget, leaseID)
	return err
}

// LeasedTarget returns the source target while leaseID holds its lease, *ErrLeaseLost otherwise: the lease check
// of CheckLease for a stage that also reads the target's annotations.
func LeasedTarget(ctx context.Context, c client.Client, namespace, sourceTarget, leaseID string) (*corev1.ConfigMap, error) {
	return checkLease(ctx, c, namespace, sourceTarget, leaseID)
}

// checkLease compares the source target's lease reference with the reference of leaseID: the annotation holds
// only the digest, so reading it is no way to present the lease.
func checkLease(ctx context.Context, c client.Client, namespace, sourceTarget, leaseID string) (*corev1.ConfigMap, error) {
	want := pipeline.LeaseRef(leaseID)
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: sourceTarget}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &ErrLeaseLost{Want: want}
		}
		return nil, fmt.Errorf("reading the source target for the lease check: %w", err)
	}
	if held := cm.Annotations[pipeline.AnnotationLeaseID]; want == "" || held != want {
		return nil, &ErrLeaseLost{Held: held, Want: want}
	}
	return cm, nil
}
