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
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// TenantControllerName is the controller name, unique across groups.
const TenantControllerName = "gitops-tenant"

// TenantFinalizer holds a Tenant until its namespaces are deleted (offboarding). Owner references alone would
// leave that to the garbage collector, which cannot tell a namespace removed from the spec from one still wanted.
const TenantFinalizer = "katastroma.org/tenant-offboarding"

// AnnotationCreatedBy marks a namespace the Tenant created (gitopsv1alpha1.AnnotationCreatedBy).
const AnnotationCreatedBy = gitopsv1alpha1.AnnotationCreatedBy

// TenantReconciler creates and owns a Tenant's namespaces and, in each, the provisioner and pruner
// ServiceAccounts, their Roles and RoleBindings and the webhook Secret; in the first, the tenant's Grafana
// dashboard ConfigMap.
type TenantReconciler struct {
	client.Client
	// APIReader reads Secrets uncached (the manager does not cache Secrets cluster-wide), and the identities
	// that tell whether the Tenant held a namespace it no longer lists (held).
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Reserved are namespaces no Tenant may hold besides the system ones (the operator's own namespace).
	Reserved []string
	// AllowPrivileged lets a Tenant ask for Pod Security level privileged (--gitops-allow-privileged-tenants).
	AllowPrivileged bool
}

// +kubebuilder:rbac:groups=katastroma.org,resources=tenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=katastroma.org,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=katastroma.org,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// The pipeline identities are bound to the shipped tenant ClusterRoles (no Role, no escalate): bind by name and the
// deletion of the Roles earlier versions wrote are granted with the Platform controller's markers, which list every
// shipped role; ClusterRoles are read to check what the aggregated tenant roles grant.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch
// ClusterRoleBindings and Platforms are read to refuse namespaces whose ServiceAccounts hold cluster-wide rights.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=katastroma.org,resources=platforms,verbs=get;list;watch
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
	var ready, unproven []string
	phaseErr := invalidSpec(tenancy.ValidatePodSecurity(t, r.AllowPrivileged))
	if phaseErr == nil {
		ready, unproven, phaseErr = r.namespaces(ctx, t)
	}
	if phaseErr == nil {
		phaseErr = r.pruneNamespaces(ctx, t)
	}
	missing, grantErr := r.missingGrants(ctx, t)
	phaseErr = errors.Join(phaseErr, grantErr)
	r.setStatus(t, ready, phaseErr, missing)
	setProofCondition(t, unproven)
	if err := kube.PatchStatusIfChanged(ctx, r.Client, before, t); err != nil {
		return ctrl.Result{}, err
	}
	var claimed *claimedError
	var notGiven *notGivenError
	var refused *reservedError
	var invalid *invalidSpecError
	if errors.As(phaseErr, &claimed) || errors.As(phaseErr, &notGiven) || errors.As(phaseErr, &refused) || errors.As(phaseErr, &invalid) {
		return ctrl.Result{}, nil // Stalled: a spec change, the other tenant leaving or the label brings it back
	}

	return ctrl.Result{}, phaseErr
}

// claimedError: a namespace of the spec carries another tenant's label.
type claimedError struct{ namespace, owner string }

func (e *claimedError) Error() string {
	return fmt.Sprintf("namespace %s belongs to tenant %s", e.namespace, e.owner)
}

// namespaces creates or adopts each namespace and writes its children; it returns the namespaces fully set up and
// those among them the Tenant holds without proof (tenancy.LabelOnly).
func (r *TenantReconciler) namespaces(ctx context.Context, t *gitopsv1alpha1.Tenant) (ready, unproven []string, err error) {
	for i, name := range t.Spec.Namespaces {
		if tenancy.Reserved(name, r.Reserved) {
			return ready, unproven, &reservedError{why: tenancy.Refusal(tenancy.Namespace{Name: name}, r.Reserved)}
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err := r.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		switch {
		case apierrors.IsNotFound(err):
			// Pod Security is set at creation, so no pod of the tenant's ever runs unconfined.
			ns.Labels = map[string]string{gitopsv1alpha1.LabelTenant: t.Name,
				gitopsv1alpha1.LabelPodSecurityEnforce: tenancy.PodSecurityLevel(t)}
			ns.Annotations = map[string]string{AnnotationCreatedBy: t.Name}
			if err := controllerutil.SetControllerReference(t, ns, r.Scheme()); err != nil {
				return ready, unproven, err
			}
			if err := r.Create(ctx, ns); err != nil {
				return ready, unproven, fmt.Errorf("creating namespace %s: %w", name, err)
			}
			r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceCreated", "Onboard", "created namespace %s", name)
		case err != nil:
			return ready, unproven, err
		case ns.DeletionTimestamp != nil:
			return ready, unproven, fmt.Errorf("namespace %s is being deleted", name)
		default:
			if owner := ns.Labels[gitopsv1alpha1.LabelTenant]; owner != "" && owner != t.Name {
				return ready, unproven, &claimedError{namespace: name, owner: owner}
			}
			proof, err := r.claim(ctx, t, ns)
			if err != nil {
				return ready, unproven, err
			}
			if proof == tenancy.LabelOnly {
				unproven = append(unproven, name)
			}
		}
		if err := r.children(ctx, t, name); err != nil {
			return ready, unproven, fmt.Errorf("namespace %s: %w", name, err)
		}
		if err := r.dashboard(ctx, t, name, i == 0); err != nil {
			return ready, unproven, fmt.Errorf("namespace %s: dashboard: %w", name, err)
		}
		ready = append(ready, name)
	}
	return ready, unproven, nil
}

// notGivenError: a namespace of the spec exists and nobody handed it to the tenant.
type notGivenError struct{ namespace, tenant string }

func (e *notGivenError) Error() string {
	return fmt.Sprintf("namespace %s exists and was not made for tenant %s: an administrator hands it over by labelling it %s=%s "+
		"and annotating it %s=%s", e.namespace, e.tenant, gitopsv1alpha1.LabelTenant, e.tenant, gitopsv1alpha1.AnnotationGrantedTo, e.tenant)
}

// adopt takes over an existing namespace an administrator labelled for the tenant; a namespace without the label
// was never given to it, and the operator does not label one itself (its escalation guard refuses that too). It
// sets no owner reference: the namespace existed before the Tenant, so neither offboarding nor the garbage
// collector may delete it. A reference left by an earlier version on a namespace the Tenant did not create is
// removed.
// A namespace held without an enforce level (one from before the operator set it) is given the Tenant's; a level
// already there, whoever set it, is kept.
func (r *TenantReconciler) adopt(ctx context.Context, t *gitopsv1alpha1.Tenant, ns *corev1.Namespace) error {
	if ns.Labels[gitopsv1alpha1.LabelTenant] != t.Name {
		return &notGivenError{namespace: ns.Name, tenant: t.Name}
	}
	before := ns.DeepCopy()
	if !createdBy(ns, t) {
		ns.OwnerReferences = slices.DeleteFunc(ns.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == t.UID })
	}
	// privileged is the API server's usual default and the escalation guard lets the operator set only the others.
	if _, has := ns.Labels[gitopsv1alpha1.LabelPodSecurityEnforce]; !has && tenancy.PodSecurityLevel(t) != tenancy.PodSecurityPrivileged {
		ns.Labels[gitopsv1alpha1.LabelPodSecurityEnforce] = tenancy.PodSecurityLevel(t)
	}
	if equalMeta(before, ns) {
		return nil
	}
	return r.Patch(ctx, ns, client.MergeFrom(before))
}

// createdBy reports whether t created ns (and may therefore delete it).
func createdBy(ns *corev1.Namespace, t *gitopsv1alpha1.Tenant) bool {
	return ns.Annotations[AnnotationCreatedBy] == t.Name
}

func equalMeta(a, b *corev1.Namespace) bool {
	return fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) && fmt.Sprint(a.OwnerReferences) == fmt.Sprint(b.OwnerReferences)
}

// release gives an adopted namespace back: the identities the Tenant wrote there are deleted and the tenant
// label removed; the namespace and everything else in it stay.
func (r *TenantReconciler) release(ctx context.Context, t *gitopsv1alpha1.Tenant, ns *corev1.Namespace) error {
	if err := r.deleteDashboard(ctx, t, ns.Name); err != nil {
		return fmt.Errorf("namespace %s: deleting the dashboard: %w", ns.Name, err)
	}
	for _, sa := range []string{gitopsv1alpha1.ProvisionerServiceAccount, gitopsv1alpha1.PrunerServiceAccount} {
		for _, obj := range []client.Object{
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "katastroma-" + sa}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "katastroma-" + sa}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: sa}},
		} {
			if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("namespace %s: deleting %T %s: %w", ns.Name, obj, obj.GetName(), err)
			}
		}
	}
	before := ns.DeepCopy()
	delete(ns.Labels, gitopsv1alpha1.LabelTenant)
	return client.IgnoreNotFound(r.Patch(ctx, ns, client.MergeFrom(before)))
}

// leave deletes a namespace the Tenant created and releases one it adopted.
func (r *TenantReconciler) leave(ctx context.Context, t *gitopsv1alpha1.Tenant, ns *corev1.Namespace) error {
	if !createdBy(ns, t) {
		if err := r.release(ctx, t, ns); err != nil {
			return err
		}
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Offboard", "released adopted namespace %s", ns.Name)
		return nil
	}
	if ns.DeletionTimestamp != nil {
		return nil
	}
	if err := r.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
	}
	r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Offboard", "deleted namespace %s", ns.Name)
	return nil
}

// pruneNamespaces deletes the namespaces this Tenant created that left its spec and releases adopted ones it
// held. A namespace an administrator labelled for the Tenant that the Tenant has not listed yet is a grant
// waiting for its claim: releasing it would take the administrator's label away, and with it the proof that
// keeps other tenants from claiming it.
func (r *TenantReconciler) pruneNamespaces(ctx context.Context, t *gitopsv1alpha1.Tenant) error {
	labelled, err := r.labelled(ctx, t)
	if err != nil {
		return err
	}
	for i := range labelled {
		if slices.Contains(t.Spec.Namespaces, labelled[i].Name) {
			continue
		}
		if !createdBy(&labelled[i], t) {
			held, err := r.held(ctx, t, labelled[i].Name)
			if err != nil {
				return err
			}
			if !held {
				continue
			}
		}
		if err := r.leave(ctx, t, &labelled[i]); err != nil {
			return err
		}
	}
	return nil
}

// held reports whether t set namespace ns up (its provisioner or pruner ServiceAccount is there, controlled by
// t), read uncached: the identities are written only once the Tenant listed a namespace, and release deletes them.
func (r *TenantReconciler) held(ctx context.Context, t *gitopsv1alpha1.Tenant, ns string) (bool, error) {
	for _, name := range []string{gitopsv1alpha1.ProvisionerServiceAccount, gitopsv1alpha1.PrunerServiceAccount} {
		sa := &corev1.ServiceAccount{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sa)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("namespace %s: reading ServiceAccount %s: %w", ns, name, err)
		case metav1.IsControlledBy(sa, t):
			return true, nil
		}
	}
	return false, nil
}

// labelled lists the namespaces labelled for t.
func (r *TenantReconciler) labelled(ctx context.Context, t *gitopsv1alpha1.Tenant) ([]corev1.Namespace, error) {
	l := &corev1.NamespaceList{}
	if err := r.List(ctx, l, client.MatchingLabels{gitopsv1alpha1.LabelTenant: t.Name}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// offboard deletes every namespace the Tenant created (and with them everything the pipeline deployed), releases
// the ones it adopted, then releases the Tenant.
func (r *TenantReconciler) offboard(ctx context.Context, t *gitopsv1alpha1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, TenantFinalizer) {
		return nil
	}
	labelled, err := r.labelled(ctx, t)
	if err != nil {
		return err
	}
	for i := range labelled {
		if err := r.leave(ctx, t, &labelled[i]); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(t.DeepCopy())
	controllerutil.RemoveFinalizer(t, TenantFinalizer)
	return r.Patch(ctx, t, patch)
}

// setStatus reports the namespaces set up and, once all are, whether the shipped tenant ClusterRoles grant what
// spec.resources asks (missing names what an administrator must add).
func (r *TenantReconciler) setStatus(t *gitopsv1alpha1.Tenant, ready []string, err error, missing string) {
	t.Status.ObservedGeneration = t.Generation
	t.Status.Namespaces = ready
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: t.Generation})
	}
	var claimed *claimedError
	var notGiven *notGivenError
	var reserved *reservedError
	var invalid *invalidSpecError
	switch {
	case err == nil && missing != "":
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonRoleMissing, missing)
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonRoleMissing, missing)
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionTrue, gitopsv1alpha1.ReasonRoleMissing, missing)
	case err == nil:
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionTrue, gitopsv1alpha1.ReasonReconciled,
			fmt.Sprintf("%d namespaces with their pipeline identities and webhook Secret", len(ready)))
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonReconciled, "up to date")
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionFalse, gitopsv1alpha1.ReasonReconciled, "up to date")
	case errors.As(err, &notGiven):
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceNotGiven, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceNotGiven, err.Error())
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionTrue, gitopsv1alpha1.ReasonNamespaceNotGiven, err.Error())
	case errors.As(err, &reserved):
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceReserved, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceReserved, err.Error())
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionTrue, gitopsv1alpha1.ReasonNamespaceReserved, err.Error())
	case errors.As(err, &invalid):
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonInvalidSpec, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonInvalidSpec, err.Error())
		cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionTrue, gitopsv1alpha1.ReasonInvalidSpec, err.Error())
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

// SetupWithManager watches Tenants and the children they control, namespaces an administrator labels for a
// Tenant (a hand-over), and the ClusterRoles aggregated into the tenant roles (an administrator granting a kind).
// Secrets are not watched (that would cache every Secret of the cluster); a deleted webhook Secret is recreated
// on the Tenant's next reconcile.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager, o kube.ControllerOptions) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&gitopsv1alpha1.Tenant{}).
		Owns(&corev1.Namespace{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(labelledTenant)).
		// A Platform appearing in a tenant's namespace makes it one no tenant may hold.
		Watches(&gitopsv1alpha1.Platform{}, handler.EnqueueRequestsFromMapFunc(r.namespaceTenant)).
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(r.allTenants),
			builder.WithPredicates(predicate.NewPredicateFuncs(aggregatedIntoTenantRoles))).
		WithOptions(o.Options()).
		Named(TenantControllerName).
		Complete(r)
}

// labelledTenant maps a namespace to the Tenant its label names.
func labelledTenant(_ context.Context, obj client.Object) []reconcile.Request {
	if name := obj.GetLabels()[gitopsv1alpha1.LabelTenant]; name != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
	}
	return nil
}

func aggregatedIntoTenantRoles(obj client.Object) bool {
	l := obj.GetLabels()
	return l[platform.AggregateToTenantProvisioner] == "true" || l[platform.AggregateToTenantPruner] == "true"
}

// allTenants maps a change of the tenant roles to every Tenant (a cluster has few).
func (r *TenantReconciler) allTenants(ctx context.Context, _ client.Object) []reconcile.Request {
	var list gitopsv1alpha1.TenantList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, t := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}})
	}
	return out
}
