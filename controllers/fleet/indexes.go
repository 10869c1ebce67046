package fleet

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/claims"
	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// Field indexes shared by the Collector, RemoteAttributePolicy and ExternalAttributeSync controllers.
const (
	// collectorIDField indexes Collectors by spec.id.
	collectorIDField = claims.IDField
	// collectorOwnerField indexes Collectors by the owners of their attributes ("<Kind>/<ns>/<name>"), so a
	// policy or sync that drops a collector still reaches it.
	collectorOwnerField = "status.attributeOwners.owner"
	// ownedCollectorField indexes ExternalAttributeSyncs by the collector IDs of status.ownedKeys.
	ownedCollectorField = "status.ownedKeys.collectorID"
)

func ownerKey(kind fleetv1alpha1.OwnerKind, ns, name string) string {
	return string(kind) + "/" + ns + "/" + name
}

func indexCollectors(ctx context.Context, mgr manager.Manager) error {
	if err := kube.IndexField(ctx, mgr, &fleetv1alpha1.Collector{}, collectorIDField, claims.IndexID); err != nil {
		return err
	}
	return kube.IndexField(ctx, mgr, &fleetv1alpha1.Collector{}, collectorOwnerField, func(o client.Object) []string {
		seen := map[string]bool{}
		var out []string
		for _, ow := range o.(*fleetv1alpha1.Collector).Status.AttributeOwners {
			k := string(ow.OwnerKind) + "/" + ow.OwnerName
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		return out
	})
}

func indexSyncs(ctx context.Context, mgr manager.Manager) error {
	return kube.IndexField(ctx, mgr, &fleetv1alpha1.ExternalAttributeSync{}, ownedCollectorField, func(o client.Object) []string {
		owned := o.(*fleetv1alpha1.ExternalAttributeSync).Status.OwnedKeys
		out := make([]string, 0, len(owned))
		for _, k := range owned {
			out = append(out, k.CollectorID)
		}
		return out
	})
}

// collectorRequests are the requests for the Collectors of ns with these IDs, plus those whose attributes owner
// names; duplicates are removed.
func collectorRequests(ctx context.Context, c client.Reader, ns string, ids []string, owner string) []reconcile.Request {
	seen := map[string]bool{}
	var out []reconcile.Request
	add := func(list *fleetv1alpha1.CollectorList) {
		for _, col := range list.Items {
			if !seen[col.Name] {
				seen[col.Name] = true
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&col)})
			}
		}
	}
	for _, id := range ids {
		list := &fleetv1alpha1.CollectorList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{collectorIDField: id}); err == nil {
			add(list)
		}
	}
	if owner != "" {
		list := &fleetv1alpha1.CollectorList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{collectorOwnerField: owner}); err == nil {
			add(list)
		}
	}
	return out
}
