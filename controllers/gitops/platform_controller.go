package gitops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.opentelemetry.io/otel/attribute"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// PlatformControllerName is the controller name, unique across groups.
const PlatformControllerName = "gitops-platform"

// PlatformFinalizer removes the Platform's cluster-scoped RBAC, which a namespaced owner cannot garbage-collect.
const PlatformFinalizer = "katastroma.org/platform-cleanup"

// PlatformReconciler deploys and owns the gitops stages of a Platform. It grants the stages read access to the
// cluster and impersonation of the tenant identities by binding the ClusterRoles shipped with the operator
// (platform.ShippedClusterRoles): the operator holds bind on those names only, never escalate on cluster RBAC, and
// never the stages' permissions themselves.
type PlatformReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// AllowedNamespaces, when set, are the only namespaces whose Platforms are deployed (--gitops-platform-namespaces):
	// a Platform's stage ServiceAccounts get cluster-wide rights, so administrators may confine where that happens.
	AllowedNamespaces []string
	// DefaultImage is the katastroma image of Platforms that name none (--katastroma-default-image).
	DefaultImage string
	// ServiceMonitors is set by SetupWithManager when the ServiceMonitor CRD is served: each Platform then gets
	// one in its namespace, with MonitoringLabels (--monitoring-labels) added.
	ServiceMonitors  bool
	MonitoringLabels map[string]string
	// RepositoryAllowCIDRs are passed to the source stage as --repository-allow-cidrs
	// (--gitops-repository-allow-cidrs): the private ranges its repository fetches may reach.
	RepositoryAllowCIDRs []string
}

// +kubebuilder:rbac:groups=katastroma.org,resources=platforms,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=katastroma.org,resources=platforms/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=katastroma.org,resources=platforms/finalizers,verbs=update
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// The shipped ClusterRoles are bound by name, never written (platform.BindableClusterRoles).
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=quartet-operator-katastroma-source;quartet-operator-katastroma-provisioner;quartet-operator-katastroma-pruner;quartet-operator-katastroma-source-tenant;quartet-operator-katastroma-pharos;quartet-operator-katastroma-caller-check;quartet-operator-katastroma-tenant-provisioner;quartet-operator-katastroma-tenant-pruner
// One ClusterRoleBinding per stage role, with fixed names (platform.SharedBindingNames): create cannot be limited by
// name, update/patch/delete are; the escalation guard refuses any other subject than a stage ServiceAccount.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;list;watch;create
// Tenants are read: a tenant namespace gets the source stage's binding only once its Tenant claimed it.
// +kubebuilder:rbac:groups=katastroma.org,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=update;patch;delete,resourceNames=quartet-operator-katastroma-source;quartet-operator-katastroma-provisioner;quartet-operator-katastroma-pruner;quartet-operator-katastroma-caller-check
// RoleBindings of shipped ClusterRoles only (pharos's here, the source stage's in tenant namespaces); the guard
// confines them to tenant and Platform namespaces. The Roles earlier versions wrote are deleted by name.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=delete,resourceNames=katastroma-pharos;katastroma-provisioner;katastroma-pruner
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile fetches the Platform, handles its deletion, writes every child and patches status once, only if changed.
func (r *PlatformReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ctx, span := telemetry.StartSpan(ctx, "gitops", "gitops.reconcile",
		attribute.String("gitops.controller", PlatformControllerName), attribute.String("k8s.namespace", req.Namespace),
		attribute.String("k8s.name", req.Name))
	defer func() { telemetry.EndSpan(span, err) }()

	p := &gitopsv1alpha1.Platform{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, p)
	}
	if controllerutil.AddFinalizer(p, PlatformFinalizer) {
		if err := r.Update(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
	}
	// After the finalizer's Update, which would store it: the default is never written into the spec, so an
	// operator upgrade moves the stages to its new default.
	if p.Spec.Image == "" {
		p.Spec.Image = r.DefaultImage
	}
	before := p.DeepCopy()
	if len(r.AllowedNamespaces) > 0 && !slices.Contains(r.AllowedNamespaces, p.Namespace) {
		r.stalled(p, fmt.Sprintf("metadata.namespace: Platforms are deployed only in %s (--gitops-platform-namespaces): "+
			"a Platform's stage ServiceAccounts get cluster-wide rights", strings.Join(r.AllowedNamespaces, ", ")))
		return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, p)
	}
	if p.Spec.Image == "" {
		r.stalled(p, "spec.image: empty, and the operator has no default stage image (--katastroma-default-image, "+
			"RELATED_IMAGE_KATASTROMA in the installs)")
		return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, p)
	}
	if errs := platform.Validate(p); len(errs) > 0 {
		r.stalled(p, errs.ToAggregate().Error())
		return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, p)
	}
	writeErr := r.writeChildren(ctx, p)
	deployments, readErr := r.observe(ctx, p)
	r.setStatus(p, deployments, errors.Join(writeErr, readErr))
	if err := kube.PatchStatusIfChanged(ctx, r.Client, before, p); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, errors.Join(writeErr, readErr)
}

// writeChildren writes every child; an unchanged child is not written.
func (r *PlatformReconciler) writeChildren(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	if err := r.sourceTenantRBAC(ctx, p); err != nil {
		return err
	}
	for _, stage := range platform.Stages {
		sa := platform.ServiceAccount(p, stage)
		if err := r.own(ctx, p, sa, &corev1.ServiceAccount{}, func(live client.Object) {
			l := live.(*corev1.ServiceAccount)
			l.Labels, l.AutomountServiceAccountToken = sa.Labels, sa.AutomountServiceAccountToken
		}); err != nil {
			return err
		}
		d := platform.Deployment(p, stage)
		if stage == gitopsv1alpha1.StageSource {
			platform.AllowRepositories(d, r.RepositoryAllowCIDRs)
		}
		if err := r.own(ctx, p, d, &appsv1.Deployment{}, func(live client.Object) {
			l := live.(*appsv1.Deployment)
			l.Labels, l.Spec.Replicas = d.Labels, d.Spec.Replicas
			// The API server fills defaults into the template: compare only what is rendered, so an unchanged
			// Platform writes nothing (and the Deployment's generation does not move).
			// DeepDerivative ignores fields the render leaves empty, so resources removed from the spec are
			// compared exactly.
			if !equality.Semantic.DeepDerivative(d.Spec.Template, l.Spec.Template) || len(l.Spec.Template.Spec.Containers) != 1 ||
				!equality.Semantic.DeepEqual(d.Spec.Template.Spec.Containers[0].Resources, l.Spec.Template.Spec.Containers[0].Resources) {
				l.Spec.Template = d.Spec.Template
			}
			if l.Spec.Selector == nil {
				l.Spec.Selector = d.Spec.Selector // immutable once created
			}
			// pharos renders Recreate (one writer of its state ConfigMap); the whole strategy is replaced, since
			// Recreate admits no rollingUpdate parameters. The other stages keep what the API server defaulted.
			if d.Spec.Strategy.Type != "" && l.Spec.Strategy.Type != d.Spec.Strategy.Type {
				l.Spec.Strategy = d.Spec.Strategy
			}
		}); err != nil {
			return err
		}
		svc := platform.Service(p, stage)
		if replaced, err := r.replaceClusterIP(ctx, p, svc); err != nil {
			return err
		} else if !replaced {
			if err := r.own(ctx, p, svc, &corev1.Service{}, func(live client.Object) {
				l := live.(*corev1.Service)
				l.Labels, l.Spec.Selector = svc.Labels, svc.Spec.Selector
				if l.ResourceVersion == "" {
					l.Spec.ClusterIP = svc.Spec.ClusterIP // immutable once created (replaceClusterIP)
				}
				if !equality.Semantic.DeepDerivative(svc.Spec.Ports, l.Spec.Ports) {
					l.Spec.Ports = svc.Spec.Ports
				}
			}); err != nil {
				return err
			}
		}
		np := platform.NetworkPolicy(p, stage)
		if err := r.own(ctx, p, np, &networkingv1.NetworkPolicy{}, func(live client.Object) {
			l := live.(*networkingv1.NetworkPolicy)
			l.Labels = np.Labels
			if !equality.Semantic.DeepDerivative(np.Spec, l.Spec) {
				l.Spec = np.Spec
			}
		}); err != nil {
			return err
		}
		if pdb := platform.PodDisruptionBudget(p, stage); pdb != nil {
			if err := r.own(ctx, p, pdb, &policyv1.PodDisruptionBudget{}, func(live client.Object) {
				l := live.(*policyv1.PodDisruptionBudget)
				l.Labels = pdb.Labels
				if !equality.Semantic.DeepDerivative(pdb.Spec, l.Spec) {
					l.Spec = pdb.Spec
				}
			}); err != nil {
				return err
			}
		}
		if err := r.stageSubject(ctx, p, stage, true); err != nil {
			return err
		}
	}
	if err := r.pharosRBAC(ctx, p); err != nil {
		return err
	}
	cm := platform.CollectorConfigMap(p)
	if err := r.own(ctx, p, cm, &corev1.ConfigMap{}, func(live client.Object) {
		l := live.(*corev1.ConfigMap)
		l.Labels, l.Data = cm.Labels, cm.Data
	}); err != nil {
		return err
	}
	if !r.ServiceMonitors {
		return nil
	}
	sm := platform.ServiceMonitor(p, r.MonitoringLabels)
	return r.own(ctx, p, sm, &monitoringv1.ServiceMonitor{}, func(live client.Object) {
		l := live.(*monitoringv1.ServiceMonitor)
		l.Labels = sm.Labels
		if !equality.Semantic.DeepDerivative(sm.Spec, l.Spec) {
			l.Spec = sm.Spec
		}
	})
}

// replaceClusterIP deletes a stage's Service that has a cluster IP where the render wants a headless one (as
// operators before the balanced stages created them): spec.clusterIP is immutable, so the Service is created
// again, here and directly — the cache still holds the deleted Service for a moment, so a CreateOrUpdate through it
// would update the deleted object and stop the pass. Only a Service the Platform controls is deleted; another one
// is a conflict the Platform reports. replaced says the headless Service was created. Callers re-resolve within a
// connection age (docs/gitops.md "Balancing").
func (r *PlatformReconciler) replaceClusterIP(ctx context.Context, p *gitopsv1alpha1.Platform, desired *corev1.Service) (replaced bool, err error) {
	if desired.Spec.ClusterIP != corev1.ClusterIPNone {
		return false, nil
	}
	live := &corev1.Service{}
	err = r.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) || (err == nil && live.Spec.ClusterIP == corev1.ClusterIPNone) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Service %s: %w", desired.Name, err)
	}
	if !metav1.IsControlledBy(live, p) {
		return false, fmt.Errorf("service %s has a cluster IP and is not controlled by Platform %s: delete it so the "+
			"Platform can create its headless Service", desired.Name, p.Name)
	}
	if err := r.Delete(ctx, live, client.Preconditions{UID: &live.UID}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting Service %s to make it headless: %w", desired.Name, err)
	}
	svc := desired.DeepCopy()
	if err := controllerutil.SetControllerReference(p, svc, r.Scheme()); err != nil {
		return false, err
	}
	if err := r.Create(ctx, svc); err != nil {
		return false, fmt.Errorf("creating the headless Service %s: %w", desired.Name, err)
	}
	return true, nil
}

// own creates desired, or updates the live object with set applied, with the Platform as controller.
func (r *PlatformReconciler) own(ctx context.Context, p *gitopsv1alpha1.Platform, desired, live client.Object, set func(client.Object)) error {
	live.SetNamespace(desired.GetNamespace())
	live.SetName(desired.GetName())
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, live, func() error {
		set(live)
		return controllerutil.SetControllerReference(p, live, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing %T %s: %w", live, desired.GetName(), err)
	}
	return nil
}

// finalize deletes the ClusterRoleBindings and the source stage's RoleBindings in tenant namespaces; the
// namespaced children go with the Platform (owner references).
func (r *PlatformReconciler) finalize(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	if !controllerutil.ContainsFinalizer(p, PlatformFinalizer) {
		return nil
	}
	for _, stage := range platform.Stages {
		if err := r.stageSubject(ctx, p, stage, false); err != nil {
			return err
		}
	}
	if err := r.pruneSourceTenantRBAC(ctx, p, nil); err != nil {
		return err
	}
	if err := r.releaseSourceTargets(ctx, p); err != nil {
		return err
	}
	patch := client.MergeFrom(p.DeepCopy())
	controllerutil.RemoveFinalizer(p, PlatformFinalizer)
	return r.Patch(ctx, p, patch)
}

// observe reads each stage's Deployment.
func (r *PlatformReconciler) observe(ctx context.Context, p *gitopsv1alpha1.Platform) (map[string]*appsv1.Deployment, error) {
	out := map[string]*appsv1.Deployment{}
	for _, stage := range platform.Stages {
		d := &appsv1.Deployment{}
		err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: platform.Name(stage)}, d)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return out, err
		default:
			out[stage] = d
		}
	}
	return out, nil
}

// stalled records a spec the controller will not deploy; a spec change brings it back.
func (r *PlatformReconciler) stalled(p *gitopsv1alpha1.Platform, msg string) {
	p.Status.ObservedGeneration = p.Generation
	for _, typ := range []string{gitopsv1alpha1.ConditionReady, gitopsv1alpha1.ConditionReconciling, gitopsv1alpha1.ConditionStalled} {
		status := metav1.ConditionFalse
		if typ == gitopsv1alpha1.ConditionStalled {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: typ, Status: status,
			Reason: gitopsv1alpha1.ReasonInvalidSpec, Message: msg, ObservedGeneration: p.Generation})
	}
}

func (r *PlatformReconciler) setStatus(p *gitopsv1alpha1.Platform, deployments map[string]*appsv1.Deployment, err error) {
	p.Status.ObservedGeneration = p.Generation
	p.Status.WebhookEndpoint = platform.WebhookURL(p)
	p.Status.Stages = nil
	var notReady []string
	for _, stage := range platform.Stages {
		st := gitopsv1alpha1.StageStatus{Name: stage, Replicas: platform.Replicas(p, stage),
			Endpoint: platform.Endpoint(p, stage)}
		if d := deployments[stage]; d != nil && d.Status.ObservedGeneration >= d.Generation {
			st.ReadyReplicas = d.Status.ReadyReplicas
		}
		if st.ReadyReplicas < st.Replicas {
			notReady = append(notReady, fmt.Sprintf("%s %d/%d", stage, st.ReadyReplicas, st.Replicas))
		}
		p.Status.Stages = append(p.Status.Stages, st)
	}
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: p.Generation})
	}
	var conflict *platform.ConflictError
	switch {
	case errors.As(err, &conflict):
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonRBACConflict, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionTrue, gitopsv1alpha1.ReasonRBACConflict, err.Error())
	case err != nil:
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonWriteFailed, err.Error())
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionTrue, gitopsv1alpha1.ReasonWriteFailed, err.Error())
	case len(notReady) > 0:
		msg := fmt.Sprintf("stages not ready: %v", notReady)
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionFalse, gitopsv1alpha1.ReasonProgressing, msg)
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionTrue, gitopsv1alpha1.ReasonProgressing, msg)
	default:
		cond(gitopsv1alpha1.ConditionReady, metav1.ConditionTrue, gitopsv1alpha1.ReasonReconciled, "every stage has its ready replicas")
		cond(gitopsv1alpha1.ConditionReconciling, metav1.ConditionFalse, gitopsv1alpha1.ReasonReconciled, "up to date")
	}
	cond(gitopsv1alpha1.ConditionStalled, metav1.ConditionFalse, gitopsv1alpha1.ReasonReconciled, "not stalled")
}

// SetupWithManager watches Platforms and the namespaced children they control. ConfigMaps are not watched (that
// would cache every ConfigMap of the cluster) and neither is the cluster RBAC: both are put back on the next
// reconcile, which any Deployment status change triggers.
func (r *PlatformReconciler) SetupWithManager(mgr ctrl.Manager, o kube.ControllerOptions) error {
	gvk := monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind)
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		r.ServiceMonitors = true
	} else if !meta.IsNoMatchError(err) {
		return fmt.Errorf("probing for the ServiceMonitor CRD: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.ServiceMonitors {
		b = b.Owns(&monitoringv1.ServiceMonitor{})
	}
	return b.
		For(&gitopsv1alpha1.Platform{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&rbacv1.RoleBinding{}).
		// A namespace labelled (or unlabelled) as a tenant gains (or loses) the source stage's Role.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.allPlatforms),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// ... once its Tenant has claimed it (the Tenant's status lists it).
		Watches(&gitopsv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.allPlatforms)).
		WithOptions(o.Options()).
		Named(PlatformControllerName).
		Complete(r)
}
