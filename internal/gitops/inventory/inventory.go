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

type ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// Name is the inventory ConfigMap of a source target.
func Name(sourceTarget string) string { return "katastroma-inventory-" + sourceTarget }

func encode(refs []*katastromav1.ObjectRef) string {
	out := make([]ref, 0, len(refs))
	for _, r := range Sorted(refs) {
		out = append(out, ref{r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName()})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func decode(s string) ([]*katastromav1.ObjectRef, error) {
	if s == "" {
		return nil, nil
	}
	var in []ref
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, err
	}
	out := make([]*katastromav1.ObjectRef, 0, len(in))
	for _, r := range in {
		out = append(out, &katastromav1.ObjectRef{ApiVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace,
			Name: r.Name})
	}
	return out, nil
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
	inv := &Inventory{Commit: cm.Data["commit"]}
	if inv.Objects, err = decode(cm.Data["objects"]); err != nil {
		return nil, nil, fmt.Errorf("inventory %s objects: %w", cm.Name, err)
	}
	if inv.Prune, err = decode(cm.Data["prune"]); err != nil {
		return nil, nil, fmt.Errorf("inventory %s prune: %w", cm.Name, err)
	}
	return inv, cm, nil
}

// Write stores inv, creating the ConfigMap or updating cm with its resourceVersion as a precondition.
func Write(ctx context.Context, c client.Client, namespace, sourceTarget string, cm *corev1.ConfigMap, inv *Inventory) error {
	data := map[string]string{"commit": inv.Commit, "objects": encode(inv.Objects), "prune": encode(inv.Prune)}
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

// ErrLeaseLost is returned when a newer processor holds the source target's lease.
type ErrLeaseLost struct{ Held, Want string }

func (e *ErrLeaseLost) Error() string {
	return fmt.Sprintf("lease lost: the source target's lease is %q, this processor holds %q", e.Held, e.Want)
}

// CheckLease fails with *ErrLeaseLost unless the source target's lease ID is leaseID.
func CheckLease(ctx context.Context, c client.Client, namespace, sourceTarget, leaseID string) error {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: sourceTarget}, cm); err != nil {
		return fmt.Errorf("reading the source target for the lease check: %w", err)
	}
	if held := cm.Annotations[pipeline.AnnotationLeaseID]; held != leaseID {
		return &ErrLeaseLost{Held: held, Want: leaseID}
	}
	return nil
}
