package gnmic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// Field indexes of TargetSources by the Secrets and ConfigMaps they name.
const (
	targetSourceSecretsField    = "spec.referencedSecrets"
	targetSourceConfigMapsField = "spec.referencedConfigMaps"
)

// ReferencedSecrets are the Secret names a TargetSource reads (source, credentials, client certificate, refresh
// auth), sorted and unique.
func ReferencedSecrets(ts *gnmicv1alpha1.TargetSource) []string {
	var names []string
	src := ts.Spec.Source
	if src.Secret != nil {
		names = append(names, src.Secret.Name)
	}
	if h := src.HTTP; h != nil {
		if a := h.Auth; a != nil {
			switch {
			case a.Basic != nil:
				names = append(names, a.Basic.SecretRef.Name)
			case a.Token != nil:
				names = append(names, a.Token.SecretRef.Name)
			case a.Header != nil:
				names = append(names, a.Header.SecretRef.Name)
			}
		}
		if h.TLS != nil && h.TLS.ClientCertRef != nil {
			names = append(names, h.TLS.ClientCertRef.Name)
		}
	}
	return uniqueSorted(names)
}

// ReferencedConfigMaps are the ConfigMap names a TargetSource reads, sorted and unique.
func ReferencedConfigMaps(ts *gnmicv1alpha1.TargetSource) []string {
	var names []string
	src := ts.Spec.Source
	if src.ConfigMap != nil {
		names = append(names, src.ConfigMap.Name)
	}
	if h := src.HTTP; h != nil && h.TLS != nil && h.TLS.CABundleRef != nil {
		names = append(names, h.TLS.CABundleRef.Name)
	}
	return uniqueSorted(names)
}

func uniqueSorted(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if s != "" && (i == 0 || s != in[i-1]) {
			out = append(out, s)
		}
	}
	return out
}

// SetupWithManager registers the controller.
//
// Watches: TargetSources on a generation change or a new requested-at annotation (its own status writes do not
// trigger a run). Targets are read from the cache (indexed by controller owner UID) but are not watched: the
// controller's own writes must not start another fetch, and drift or a hand-deleted Target is repaired on the next
// run. Secrets and ConfigMaps are watched metadata-only (Secrets are not cached by this manager and caching every
// ConfigMap's data cluster-wide is wasteful); an event for a name some TargetSource references is turned into a
// run only when the object's data digest changed since it was last seen (referencedData).
func (r *TargetSourceReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.Target{}, targetControllerUIDField, func(o client.Object) []string {
		if uid := controllerUID(o); uid != "" {
			return []string{string(uid)}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.TargetSource{}, targetSourceSecretsField, func(o client.Object) []string {
		return ReferencedSecrets(o.(*gnmicv1alpha1.TargetSource))
	}); err != nil {
		return err
	}
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.TargetSource{}, targetSourceConfigMapsField, func(o client.Object) []string {
		return ReferencedConfigMaps(o.(*gnmicv1alpha1.TargetSource))
	}); err != nil {
		return err
	}
	secrets := &referencedData{r: r, field: targetSourceSecretsField, seen: map[types.NamespacedName]string{},
		read: func(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
			s := &corev1.Secret{}
			if err := r.APIReader.Get(ctx, key, s); err != nil {
				return nil, err
			}
			return s.Data, nil
		}}
	configMaps := &referencedData{r: r, field: targetSourceConfigMapsField, seen: map[types.NamespacedName]string{},
		read: func(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
			cm := &corev1.ConfigMap{}
			if err := r.APIReader.Get(ctx, key, cm); err != nil {
				return nil, err
			}
			data := map[string][]byte{}
			for k, v := range cm.BinaryData {
				data["b:"+k] = v
			}
			for k, v := range cm.Data {
				data["s:"+k] = []byte(v)
			}
			return data, nil
		}}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	cmMeta := &metav1.PartialObjectMetadata{}
	cmMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return ctrl.NewControllerManagedBy(mgr).
		Named(TargetSourceControllerName).
		For(&gnmicv1alpha1.TargetSource{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, requestedAtChanged{}))).
		WatchesMetadata(secretMeta, secrets.handler()).
		WatchesMetadata(cmMeta, configMaps.handler()).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(TargetSourceControllerName, r))
}

// requestedAtChanged passes updates that set a new operator.gnmic.dev/requested-at annotation.
type requestedAtChanged struct{ predicate.Funcs }

func (requestedAtChanged) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetAnnotations()[gnmicv1alpha1.AnnotationRequestedAt] !=
		e.ObjectNew.GetAnnotations()[gnmicv1alpha1.AnnotationRequestedAt]
}

// referencedData turns events of referenced Secrets or ConfigMaps into runs, only when their data changed.
type referencedData struct {
	r     *TargetSourceReconciler
	field string
	read  func(context.Context, types.NamespacedName) (map[string][]byte, error)
	mu    sync.Mutex
	seen  map[types.NamespacedName]string
}

type request = reconcile.Request

func (d *referencedData) handler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[request]) {
			d.changed(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[request]) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				d.changed(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[request]) {
			key := client.ObjectKeyFromObject(e.Object)
			d.mu.Lock()
			delete(d.seen, key)
			d.mu.Unlock()
			for _, req := range d.referencing(ctx, e.Object) {
				q.Add(req)
			}
		},
	}
}

func (d *referencedData) referencing(ctx context.Context, o client.Object) []request {
	list := &gnmicv1alpha1.TargetSourceList{}
	if err := d.r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{d.field: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing TargetSources by reference", "field", d.field, "name", o.GetName())
		return nil
	}
	reqs := make([]request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// changed enqueues the TargetSources referencing o when o's data digest differs from the last one seen (or was
// never seen: a referenced object appearing must end a SecretNotFound/ConfigMapNotFound stall at once).
func (d *referencedData) changed(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[request]) {
	reqs := d.referencing(ctx, o)
	if len(reqs) == 0 {
		return
	}
	key := client.ObjectKeyFromObject(o)
	data, err := d.read(ctx, key)
	if err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).Error(err, "reading referenced object", "object", key)
		return
	}
	digest := dataDigest(data)
	d.mu.Lock()
	prev, known := d.seen[key]
	d.seen[key] = digest
	d.mu.Unlock()
	if known && prev == digest {
		return
	}
	for _, req := range reqs {
		q.Add(req)
	}
}

func dataDigest(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(data[k])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
