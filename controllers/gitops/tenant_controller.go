// Package gitops holds the reconcilers of the katastroma.org group.
package gitops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// TenantControllerName is the controller name, unique across groups.
const TenantControllerName = "gitops-tenant"

// TenantFinalizer holds a Tenant until its namespaces are deleted (offboarding). Owner references alone would
// leave that to the garbage collector, which cannot tell a namespace removed from the spec from one still wanted.
const TenantFinalizer = "katastroma.org/tenant-offboarding"

// TenantReconciler creates and owns a Tenant's namespaces and, in each, the provisioner and pruner
// ServiceAccounts, their Roles and RoleBindings and the webhook Secret.
type TenantReconciler struct {
	client.Client
	// APIReader reads Secrets uncached: the manager does not cache Secrets cluster-wide.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
}

// +kubebuilder:rbac:groups=katastroma.org,resources=tenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=katastroma.org,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=katastroma.org,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete;escalate;bind
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Tenant, handles offboarding, writes its children and patches status once, only if changed.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ctx, span := telemetry.StartSpan(ctx, "gitops", "gitops.reconcile",
		attribute.String("gitops.controller", TenantControllerName), attribute.String("k8s.name", req.Name))
	defer func() { telemetry.EndSpan(span, err) }()

	t := &gitopsv1alpha1.Tenant{}
	if err := r.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil {
		return ctrl.Result{}, r.offboard(ctx, t)
	}
	if controllerutil.AddFinalizer(t, TenantFinalizer) {
		if err := r.Update(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := t.DeepCopy()
	ready, phaseErr := r.namespaces(ctx, t)
	if phaseErr == nil {
		phaseErr = r.pruneNamespaces(ctx, t)
	}
	r.setStatus(t, ready, phaseErr)
	if err := kube.PatchStatusIfChanged(ctx, r.Client, before, t); err != nil {
		return ctrl.Result{}, err
	}
	var claimed *claimedError
	if errors.As(phaseErr, &claimed) {
		return ctrl.Result{}, nil // Stalled: a spec change or the other tenant leaving brings it back
	}
	return ctrl.Result{}, phaseErr
}

// claimedError: a namespace of the spec carries another tenant's label.
type claimedError struct{ namespace, owner string }

func (e *claimedError) Error() string {
	return fmt.Sprintf("namespace %s belongs to tenant %s", e.namespace, e.owner)
}

// namespaces creates or adopts each namespace and writes its children; it returns the namespaces fully set up.
func (r *TenantReconciler) namespaces(ctx context.Context, t *gitopsv1alpha1.Tenant) ([]string, error) {
	var ready []string
	for _, name := range t.Spec.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err := r.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		switch {
		case apierrors.IsNotFound(err):
			ns.Labels = map[string]string{gitopsv1alpha1.LabelTenant: t.Name}
			if err := controllerutil.SetControllerReference(t, ns, r.Scheme()); err != nil {
				return ready, err
			}
			if err := r.Create(ctx, ns); err != nil {
				return ready, fmt.Errorf("creating namespace %s: %w", name, err)
			}
			r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceCreated", "Onboard", "created namespace %s", name)
		case err != nil:
			return ready, err
		case ns.DeletionTimestamp != nil:
			return ready, fmt.Errorf("namespace %s is being deleted", name)
		default:
			if owner := ns.Labels[gitopsv1alpha1.LabelTenant]; owner != "" && owner != t.Name {
				return ready, &claimedError{namespace: name, owner: owner}
			}
			if err := r.adopt(ctx, t, ns); err != nil {
				return ready, err
			}
		}
		if err := r.children(ctx, t, name); err != nil {
			return ready, fmt.Errorf("namespace %s: %w", name, err)
		}
		ready = append(ready, name)
	}
	return ready, nil
}

// adopt labels an existing unlabelled namespace for the tenant and makes the Tenant its controller.
func (r *TenantReconciler) adopt(ctx context.Context, t *gitopsv1alpha1.Tenant, ns *corev1.Namespace) error {
	before := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[gitopsv1alpha1.LabelTenant] = t.Name
	if err := controllerutil.SetControllerReference(t, ns, r.Scheme()); err != nil {
		return fmt.Errorf("namespace %s: %w", ns.Name, err)
	}
	if equalMeta(before, ns) {
		return nil
	}
	return r.Patch(ctx, ns, client.MergeFrom(before))
}

func equalMeta(a, b *corev1.Namespace) bool {
	return fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) && fmt.Sprint(a.OwnerReferences) == fmt.Sprint(b.OwnerReferences)
}

// pruneNamespaces deletes namespaces this Tenant controls that left its spec.
func (r *TenantReconciler) pruneNamespaces(ctx context.Context, t *gitopsv1alpha1.Tenant) error {
	owned, err := r.owned(ctx, t)
	if err != nil {
		return err
	}
	for i := range owned {
		ns := &owned[i]
		if slices.Contains(t.Spec.Namespaces, ns.Name) || ns.DeletionTimestamp != nil {
			continue
		}
		if err := r.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Offboard", "deleted namespace %s, no longer in spec.namespaces", ns.Name)
	}
	return nil
}

// owned lists the namespaces labelled for t that t controls.
func (r *TenantReconciler) owned(ctx context.Context, t *gitopsv1alpha1.Tenant) ([]corev1.Namespace, error) {
	l := &corev1.NamespaceList{}
	if err := r.List(ctx, l, client.MatchingLabels{gitopsv1alpha1.LabelTenant: t.Name}); err != nil {
		return nil, err
	}
	var out []corev1.Namespace
	for _, ns := range l.Items {
		if ref := metav1.GetControllerOf(&ns); ref != nil && ref.UID == t.UID {
			out = append(out, ns)
		}
	}
	return out, nil
}

// offboard deletes every namespace the Tenant controls (and with them everything the pipeline deployed), then
// releases the Tenant.
func (r *TenantReconciler) offboard(ctx context.Context, t *gitopsv1alpha1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, TenantFinalizer) {
		return nil
	}
	owned, err := r.owned(ctx, t)
	if err != nil {
		return err
	}
	for i := range owned {
		if owned[i].DeletionTimestamp != nil {
			continue
		}
		if err := r.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", owned[i].Name, err)
		}
	}
	patch := client.MergeFrom(t.DeepCopy())
	controllerutil.RemoveFinalizer(t, TenantFinalizer)
	return r.Patch(ctx, t, patch)
}

func (r *TenantReconciler) setStatus(t *gitopsv1alpha1.Tenant, ready []string, err error) {
	t.Status.ObservedGeneration = t.Generation
	t.Status.Namespaces = ready
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: t.Generation})
	}
	var claimed *claimedError
	switch {
	case err == nil:
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionTrue, gitopsv1alpha1.ReasonReconciled,
			fmt.Sprintf("%d namespaces with their pipeline identities and webhook Secret", len(ready)))
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonReconciled, "up to date")
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionFalse, gitopsv1alpha1.ReasonReconciled, "up to date")
	case errors.As(err, &claimed):
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceClaimed, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceClaimed, err.Error())
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionTrue, gitopsv1alpha1.ReasonNamespaceClaimed, err.Error())
	default:
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonWriteFailed, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionTrue, gitopsv1alpha1.ReasonProgressing, err.Error())
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionFalse, gitopsv1alpha1.ReasonProgressing, "retrying")
	}
}

// SetupWithManager watches Tenants and the children they control. Secrets are not watched (that would cache
// every Secret of the cluster); a deleted webhook Secret is recreated on the Tenant's next reconcile.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager, o kube.ControllerOptions) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&gitopsv1alpha1.Tenant{}).
		Owns(&corev1.Namespace{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		WithOptions(o.Options()).
		Named(TenantControllerName).
		Complete(r)
}
