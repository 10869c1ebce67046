package gnmic

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// Indexes of TargetProfiles by the Secrets and ConfigMaps they reference.
const (
	profileSecretsIx    = "spec.referencedSecrets"
	profileConfigMapsIx = "spec.referencedConfigMaps"
)

// ProfileSecrets are the Secret names a TargetProfile reads: credentials, CA bundle, client certificate.
func ProfileSecrets(p *gnmicv1alpha1.TargetProfile) []string {
	var names []string
	if ref := p.Spec.CredentialsRef; ref != nil {
		names = append(names, ref.Name)
	}
	if t := p.Spec.TLS; t != nil {
		if t.CABundle != nil && t.CABundle.SecretRef != nil {
			names = append(names, t.CABundle.SecretRef.Name)
		}
		if t.ClientCertRef != nil {
			names = append(names, t.ClientCertRef.Name)
		}
	}
	return uniqueSorted(names)
}

// ProfileConfigMaps are the ConfigMap names a TargetProfile reads (its CA bundle).
func ProfileConfigMaps(p *gnmicv1alpha1.TargetProfile) []string {
	if t := p.Spec.TLS; t != nil && t.CABundle != nil && t.CABundle.ConfigMapRef != nil {
		return []string{t.CABundle.ConfigMapRef.Name}
	}
	return nil
}

// secretsToClusters maps a Secret (or, with profileConfigMapsIx, ConfigMap) event to the Clusters whose
// Pipelines may use a profile that references it.
// Secrets are watched metadata-only (this manager caches no Secret data); a reconcile that finds nothing changed
// pushes nothing, since each pod's payload is compared with the last one applied, so only pods whose targets
// use the Secret receive a new configuration.
func (r *ClusterReconciler) referencedToClusters(index string) handler.EventHandler {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[request]) {
		profiles := &gnmicv1alpha1.TargetProfileList{}
		if err := r.List(ctx, profiles, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing TargetProfiles by reference", "index", index, "name", o.GetName())
			return
		}
		if len(profiles.Items) == 0 {
			return
		}
		for _, req := range r.clustersInNamespace(ctx, o) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[request]) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				enqueue(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

// indexProfileReferences registers the TargetProfile → Secret and → ConfigMap indexes.
func indexProfileReferences(ctx context.Context, mgr ctrl.Manager) error {
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.TargetProfile{}, profileSecretsIx, func(o client.Object) []string {
		return ProfileSecrets(o.(*gnmicv1alpha1.TargetProfile))
	}); err != nil {
		return err
	}
	return kube.IndexField(ctx, mgr, &gnmicv1alpha1.TargetProfile{}, profileConfigMapsIx, func(o client.Object) []string {
		return ProfileConfigMaps(o.(*gnmicv1alpha1.TargetProfile))
	})
}

// metadataOf is the metadata-only watch type of a core kind.
func metadataOf(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// labelledClusterOf maps a Secret labelled with a Cluster's name to that Cluster: the Secrets cert-manager writes
// for the Cluster's Certificates carry the label (spec.secretTemplate), so an issued or renewed certificate is
// picked up at once.
func labelledClusterOf(_ context.Context, o client.Object) []request {
	name := o.GetLabels()[labelCluster]
	if name == "" {
		return nil
	}
	return []request{{NamespacedName: ktypes.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
