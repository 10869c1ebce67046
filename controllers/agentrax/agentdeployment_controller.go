package agentrax

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// AgentDeploymentControllerName is the controller name, unique across groups.
const AgentDeploymentControllerName = "agentrax-agentdeployment"

// Registrar publishes agents in the MCP discovery registry (internal/agentrax/registration.Adapter; the
// NoopRegistrar, which leaves status.registered false, when the registry is disabled).
type Registrar interface {
	// Register publishes ad and reports whether it is now registered.
	Register(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error)
	// Deregister removes ad; it is called before the finalizer is removed, while the agent's Service still exists.
	Deregister(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error
}

// NoopRegistrar is the Registrar used when no registry runs.
type NoopRegistrar struct{}

// Register implements Registrar; nothing is registered.
func (NoopRegistrar) Register(context.Context, *agentraxv1alpha1.AgentDeployment) (bool, error) {
	return false, nil
}

// Deregister implements Registrar.
func (NoopRegistrar) Deregister(context.Context, *agentraxv1alpha1.AgentDeployment) error { return nil }

// AgentDeploymentReconciler runs an agent: stable Deployment and Service, a PodMonitor scraping both variants
// (when prometheus-operator is installed), a quota-capped HPA, registration, and status.
type AgentDeploymentReconciler struct {
	client.Client
	Recorder    recorder.EventRecorder
	Registrar   Registrar
	GPUResource corev1.ResourceName
	// PodMonitors is set by SetupWithManager when the PodMonitor CRD exists.
	PodMonitors bool
	// Canary configures canary rollouts (agentdeployment_canary.go).
	Canary CanaryConfig

	// pods reads the agents' pods from a cache scoped to them (agentdeployment_pods.go); nil skips ImagePullFailed.
	pods client.Reader
}

// +kubebuilder:rbac:groups=agentrax.io,resources=agentdeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentrax.io,resources=agentdeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentrax.io,resources=agentdeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentrax.io,resources=tenantquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// observed is what the phases learn for the status.
type observed struct {
	deployment *appsv1.Deployment
	cap        quota.Cap
	quotaFound bool
	registered bool
	// requeue, when set, brings the reconcile back after it (heartbeats of registered agents).
	requeue time.Duration
}

// Reconcile fetches the AgentDeployment, handles deletion and the finalizer, runs the phases and patches status
// once at the end, only when it changed.
func (r *AgentDeploymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ctx, end := startReconcile(ctx, AgentDeploymentControllerName, req.Namespace, req.Name)
	defer func() { end(err) }()

	ad := &agentraxv1alpha1.AgentDeployment{}
	if err := r.Get(ctx, req.NamespacedName, ad); err != nil {
		if apierrors.IsNotFound(err) {
			forgetAgentMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ad.DeletionTimestamp != nil {
		forgetAgentMetrics(req.Namespace, req.Name)
		return ctrl.Result{}, r.finalize(ctx, ad)
	}
	// On every exit path, failed phases included: the phase is what the rollout alerts read.
	defer recordPhase(ad)
	if !controllerutil.ContainsFinalizer(ad, agentraxv1alpha1.Finalizer) {
		patch := client.MergeFrom(ad.DeepCopy())
		controllerutil.AddFinalizer(ad, agentraxv1alpha1.Finalizer)
		if err := r.Patch(ctx, ad, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The status is the rollout's persisted state, so it is written only over the version this pass read
	// (a decision made on a stale cached copy gets a conflict and a retry, never a mixed state).
	before := ad.DeepCopy()
	obs := &observed{}
	for _, phase := range []func(context.Context, *agentraxv1alpha1.AgentDeployment, *observed) error{
		r.reconcileDeployment,
		r.reconcileImagePull,
		r.reconcileService,
		r.reconcilePodMonitor,
		r.reconcileHPA,
		r.reconcileCanary,
		r.reconcileRegistration,
	} {
		if err := phase(ctx, ad, obs); err != nil {
			setCondition(ad, agentraxv1alpha1.ConditionReconciled, metav1.ConditionFalse, agentraxv1alpha1.ReasonReconcileFailed, err.Error())
			setCondition(ad, agentraxv1alpha1.ConditionReady, metav1.ConditionFalse, agentraxv1alpha1.ReasonReconcileFailed, err.Error())
			// The phase's error is returned after the status is written, so a transient failure gets
			// controller-runtime's rate-limited retry even when the status did not change.
			return ctrl.Result{}, errors.Join(err, kube.PatchStatusIfChangedOptimistic(ctx, r.Client, before, ad))
		}
	}
	r.summarize(ad, obs)
	return ctrl.Result{RequeueAfter: obs.requeue}, kube.PatchStatusIfChangedOptimistic(ctx, r.Client, before, ad)
}

// finalize deregisters the agent while its Service still exists (the Service's own finalizer keeps it, whatever
// the propagation policy) and its pods still run (the stable Deployment is no garbage-collector dependent), then
// deletes the stable Deployment, releases the Service and removes the agent's finalizer.
func (r *AgentDeploymentReconciler) finalize(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	if !controllerutil.ContainsFinalizer(ad, agentraxv1alpha1.Finalizer) {
		return nil
	}
	if err := r.Registrar.Deregister(ctx, ad); err != nil {
		r.Recorder.Eventf(ad, nil, corev1.EventTypeWarning, "DeregisterFailed", "Finalize", "deregistering from the MCP registry: %v", err)
		return fmt.Errorf("deregistering %s/%s from the MCP registry: %w", ad.Namespace, ad.Name, err)
	}
	// Only now may the backends go: the registry no longer sends anyone to them.
	if err := r.deleteStableDeployment(ctx, ad); err != nil {
		return fmt.Errorf("deleting Deployment %s/%s after deregistration: %w", ad.Namespace, ad.Name, err)
	}
	svc := &corev1.Service{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: ad.Name}, svc); err == nil {
		if err := releaseDeregistrationHold(ctx, r.Client, svc); err != nil {
			return fmt.Errorf("releasing Service %s/%s after deregistration: %w", ad.Namespace, ad.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	patch := client.MergeFrom(ad.DeepCopy())
	controllerutil.RemoveFinalizer(ad, agentraxv1alpha1.Finalizer)
	return client.IgnoreNotFound(r.Patch(ctx, ad, patch))
}

func setCondition(ad *agentraxv1alpha1.AgentDeployment, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ad.Status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: ad.Generation,
	})
}

// reconcileHPA writes the autoscaler with maxReplicas capped by the quota headroom and sets QuotaLimited.
func (r *AgentDeploymentReconciler) reconcileHPA(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, obs *observed) error {
	spec := ad.Spec.Replicas
	tq := &agentraxv1alpha1.TenantQuota{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: ad.Spec.TenantRef}, tq)
	switch {
	case apierrors.IsNotFound(err):
		obs.cap = quota.Cap{MaxReplicas: spec.Max}
		setCondition(ad, agentraxv1alpha1.ConditionQuotaLimited, metav1.ConditionUnknown, agentraxv1alpha1.ReasonTenantQuotaNotFound,
			fmt.Sprintf("TenantQuota %q not found; maxReplicas is replicas.max", ad.Spec.TenantRef))
	case err != nil:
		return err
	default:
		ledger, err := quota.ParseLedger(tq.Status.Ledger)
		if err != nil {
			// The TenantQuota controller rebuilds an unreadable ledger; its write brings this agent back.
			return fmt.Errorf("TenantQuota %q: %w", tq.Name, err)
		}
		obs.quotaFound = true
		others := quota.LedgerUsage(ledger, ad.Name).Replicas
		obs.cap = quota.HPAMaxReplicas(spec.Min, spec.Max, tq.Spec, others)
		c := obs.cap
		switch {
		case c.Clamped:
			setCondition(ad, agentraxv1alpha1.ConditionQuotaLimited, metav1.ConditionTrue, agentraxv1alpha1.ReasonHPAMaxReplicasCapped, fmt.Sprintf(
				"TenantQuota %q leaves %d replicas (maxTotalReplicas %d − %d reserved by other agents, maxReplicasPerAgent %d), below replicas.min %d: maxReplicas clamped to %d",
				tq.Name, c.Headroom, tq.Spec.MaxTotalReplicas, others, tq.Spec.MaxReplicasPerAgent, spec.Min, c.MaxReplicas))
		case c.Reduced:
			setCondition(ad, agentraxv1alpha1.ConditionQuotaLimited, metav1.ConditionTrue, agentraxv1alpha1.ReasonMaxReplicasReduced, fmt.Sprintf(
				"TenantQuota %q caps maxReplicas at %d (replicas.max %d; maxTotalReplicas %d − %d reserved by other agents, maxReplicasPerAgent %d)",
				tq.Name, c.MaxReplicas, spec.Max, tq.Spec.MaxTotalReplicas, others, tq.Spec.MaxReplicasPerAgent))
		default:
			setCondition(ad, agentraxv1alpha1.ConditionQuotaLimited, metav1.ConditionFalse, agentraxv1alpha1.ReasonWithinQuota,
				fmt.Sprintf("maxReplicas is replicas.max (%d)", spec.Max))
		}
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, hpa, func() error {
		hpa.Labels = mergeLabels(hpa.Labels, childLabels(ad))
		desiredHPA(ad, obs.cap.MaxReplicas).DeepCopyInto(&hpa.Spec)
		return controllerutil.SetControllerReference(ad, hpa, r.Scheme())
	})
	return err
}

// summarize derives phase, replicas, versions and the Ready and Reconciled conditions.
func (r *AgentDeploymentReconciler) summarize(ad *agentraxv1alpha1.AgentDeployment, obs *observed) {
	dep := obs.deployment
	ad.Status.ObservedGeneration = ad.Generation
	ad.Status.Registered = obs.registered
	ad.Status.CurrentReplicas = dep.Status.Replicas
	phase, ready, reason, msg := agentraxv1alpha1.PhasePending, metav1.ConditionFalse, agentraxv1alpha1.ReasonProgressing,
		fmt.Sprintf("%d of replicas.min %d pods available", dep.Status.AvailableReplicas, ad.Spec.Replicas.Min)
	if dep.Status.AvailableReplicas >= ad.Spec.Replicas.Min {
		phase, ready, reason = agentraxv1alpha1.PhaseRunning, metav1.ConditionTrue, agentraxv1alpha1.ReasonAvailable
	} else if c := deploymentCondition(dep, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionFalse {
		phase, reason, msg = agentraxv1alpha1.PhaseDegraded, c.Reason, c.Message
	}
	// A failed rollout is still pending while spec.image names the rolled-back image. A degraded stable outranks
	// it: it is what serves, and RolloutFailed would keep the Degraded alert silent (RolloutHealthy and
	// status.abortedVersion still tell of the failed rollout, and RolloutFailed returns once the stable recovers).
	failed := ad.Status.Phase == agentraxv1alpha1.PhaseRolloutFailed || (ad.Status.Stage == "" &&
		ad.Status.AbortedVersion != "" && ad.Status.AbortedVersion == ad.Spec.Image && isCanary(ad))
	switch {
	case ad.Status.Phase == agentraxv1alpha1.PhaseRolloutInProgress:
	case phase == agentraxv1alpha1.PhaseDegraded || !failed:
		ad.Status.Phase = phase
	default:
		ad.Status.Phase = agentraxv1alpha1.PhaseRolloutFailed
	}
	setCondition(ad, agentraxv1alpha1.ConditionReady, ready, reason, msg)
	setCondition(ad, agentraxv1alpha1.ConditionReconciled, metav1.ConditionTrue, agentraxv1alpha1.ReasonReconciled,
		"Deployment, Service, HorizontalPodAutoscaler and monitoring match the spec")
}

func deploymentCondition(dep *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range dep.Status.Conditions {
		if dep.Status.Conditions[i].Type == t {
			return &dep.Status.Conditions[i]
		}
	}
	return nil
}

// podMonitorGVK is probed once at setup: without the CRD the monitoring phase is skipped.
var podMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}

// SetupWithManager registers the controller: it owns every child (so deleting one out of band brings it back)
// and watches TenantQuotas whose ceilings change what the HPAs may reach.
func (r *AgentDeploymentReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if r.Registrar == nil {
		r.Registrar = NoopRegistrar{}
	}
	if err := kube.IndexField(ctx, mgr, &agentraxv1alpha1.AgentDeployment{}, tenantRefField, tenantRefOf); err != nil {
		return err
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(podMonitorGVK.GroupKind(), podMonitorGVK.Version); err == nil {
		r.PodMonitors = true
	} else if !meta.IsNoMatchError(err) {
		return fmt.Errorf("probing for the PodMonitor CRD: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(AgentDeploymentControllerName).
		For(&agentraxv1alpha1.AgentDeployment{}).
		// Agent Deployments by their labels: the stable one has no owner reference (reconcileDeployment).
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(agentOfDeployment)).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Watches(&agentraxv1alpha1.TenantQuota{}, handler.EnqueueRequestsFromMapFunc(r.agentsOfQuota),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: quotaCeilingsMoved}))
	if r.PodMonitors {
		b = b.Owns(&monitoringv1.PodMonitor{})
	}
	if err := r.setupCanary(ctx, mgr, b); err != nil {
		return err
	}
	if err := r.setupPodCache(mgr, b); err != nil {
		return err
	}
	r.setupWakeups(b)
	return b.WithOptions(opts.Options()).Complete(telemetry.TracedReconciler(AgentDeploymentControllerName, r))
}

// quotaCeilingsMoved passes TenantQuota updates that can change an HPA cap: a new spec, or a ledger over the
// replica ceiling (otherwise admission guarantees every agent's replicas.max fits).
func quotaCeilingsMoved(e event.UpdateEvent) bool {
	oldQ, ok1 := e.ObjectOld.(*agentraxv1alpha1.TenantQuota)
	newQ, ok2 := e.ObjectNew.(*agentraxv1alpha1.TenantQuota)
	if !ok1 || !ok2 {
		return true
	}
	if oldQ.Generation != newQ.Generation {
		return true
	}
	if oldQ.Status.Ledger == newQ.Status.Ledger {
		return false
	}
	oldLedger, errOld := quota.ParseLedger(oldQ.Status.Ledger)
	newLedger, errNew := quota.ParseLedger(newQ.Status.Ledger)
	if errOld != nil || errNew != nil {
		return true
	}
	oldTotal := quota.LedgerUsage(oldLedger, "").Replicas
	newTotal := quota.LedgerUsage(newLedger, "").Replicas
	return oldTotal != newTotal && (oldTotal > oldQ.Spec.MaxTotalReplicas || newTotal > newQ.Spec.MaxTotalReplicas)
}

func (r *AgentDeploymentReconciler) agentsOfQuota(ctx context.Context, tq client.Object) []reconcile.Request {
	ads := &agentraxv1alpha1.AgentDeploymentList{}
	if err := r.List(ctx, ads, client.InNamespace(tq.GetNamespace()), client.MatchingFields{tenantRefField: tq.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing AgentDeployments of TenantQuota", "tenantQuota", tq.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(ads.Items))
	for i := range ads.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ads.Items[i])})
	}
	return reqs
}
