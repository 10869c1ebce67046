package agentrax

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// CanaryConfig configures canary rollouts (the manager's --prometheus-* and --canary-* flags).
type CanaryConfig struct {
	// Prometheus answers the analysis queries; nil means no --prometheus-url was given, and every pause stays
	// inconclusive (never promoted unevaluated, never failed open).
	Prometheus *rollout.Prometheus
	// FailsafeTimeout is how long Prometheus may stay unreachable during a pause before a rollback; zero means
	// rollout.DefaultFailsafeTimeout.
	FailsafeTimeout time.Duration
	// AnalysisInterval is how often a pause re-evaluates the canary; zero means rollout.DefaultAnalysisInterval.
	AnalysisInterval time.Duration
	// APIReader reads the AgentDeployment uncached, so a rollout never decides on a status the cache has not
	// caught up with (a stale pauseStartedAt would restart a pause). Nil skips the check.
	APIReader client.Reader
	// Clock is the rollout's time source; nil means the real clock.
	Clock clock.PassiveClock

	// routes is set by SetupWithManager when the Gateway API HTTPRoute CRD exists.
	routes bool
}

// continueAfter is how soon a reconcile follows one whose decision moved the rollout to a stage that can act at
// once (the status patch's own watch event usually comes first).
const continueAfter = 200 * time.Millisecond

// Canary condition reasons the controller adds to those of internal/agentrax/rollout.
const (
	reasonNoTrafficRoute = "NoTrafficRoute"
	reasonRouteMissing   = "RouteNotFound"
	reasonNoGatewayAPI   = "GatewayAPIMissing"
)

func canaryName(ad *agentraxv1alpha1.AgentDeployment) string { return ad.Name + "-canary" }

// stableImage is the image the stable Deployment runs. With strategy Canary a new spec.image reaches it only
// by promotion, so it stays at status.stableVersion until the rollout's Promoting stage hands it the canary's.
func stableImage(ad *agentraxv1alpha1.AgentDeployment) string {
	st := ad.Status
	switch {
	case st.Stage == agentraxv1alpha1.StagePromoting && st.CanaryVersion != "":
		return st.CanaryVersion
	case st.StableVersion != "" && (st.Stage != "" || isCanary(ad)):
		return st.StableVersion
	}
	return ad.Spec.Image
}

func isCanary(ad *agentraxv1alpha1.AgentDeployment) bool {
	return ad.Spec.Rollout != nil && ad.Spec.Rollout.Strategy == agentraxv1alpha1.StrategyCanary
}

// reconcileCanary drives internal/agentrax/rollout: observe, decide, carry the actions out in order, and only when all
// succeeded take the decided status, so a failure or a crash replays the same decision.
func (r *AgentDeploymentReconciler) reconcileCanary(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, obs *observed) error {
	cfg := &r.Canary
	now := time.Now()
	if cfg.Clock != nil {
		now = cfg.Clock.Now()
	}
	inFlight := ad.Status.Stage != "" || (isCanary(ad) && ad.Status.StableVersion != "" &&
		ad.Spec.Image != ad.Status.StableVersion && (ad.Spec.Image != ad.Status.AbortedVersion || quota.RetryRequested(ad)))
	if inFlight && cfg.APIReader != nil {
		fresh := &metav1.PartialObjectMetadata{}
		fresh.SetGroupVersionKind(agentraxv1alpha1.GroupVersion.WithKind("AgentDeployment"))
		if err := cfg.APIReader.Get(ctx, client.ObjectKeyFromObject(ad), fresh); err != nil {
			return err
		}
		if fresh.ResourceVersion != ad.ResourceVersion {
			// The cache lags the last status this controller wrote: deciding on it could move a pause start.
			obs.requeueAfter(continueAfter)
			return nil
		}
	}
	if inFlight && ad.Status.Stage == "" && !r.trafficReady(ctx, ad) {
		return nil
	}
	if t := ad.Spec.Rollout; isCanary(ad) && t.Traffic != nil && t.Traffic.Route != nil && r.Canary.routes {
		// The owned route is the agent's entry point between canaries too; its shape follows the spec, its
		// weights only the rollout.
		if err := r.ensureOwnedRoute(ctx, ad, nil, nil); err != nil {
			return err
		}
	}
	spec, err := r.rolloutSpec(ctx, ad)
	if err != nil {
		return err
	}
	st := rolloutStatus(ad)
	o, err := r.observeCanary(ctx, ad, obs, spec, st, now)
	if err != nil {
		return err
	}
	d := rollout.Decide(spec, st, o)
	for _, a := range d.Actions {
		if err := r.act(ctx, ad, obs, a); err != nil {
			return fmt.Errorf("rollout action %s: %w", a.Kind, err)
		}
	}
	for _, e := range d.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(ad, nil, typ, e.Reason, "Rollout", "%s", e.Message)
	}
	applyRolloutStatus(ad, d.Status)
	switch {
	case d.Continue:
		obs.requeueAfter(continueAfter)
	case d.RequeueAfter > 0:
		obs.requeueAfter(d.RequeueAfter)
	}
	return nil
}

// trafficReady tells whether a new canary can get traffic; when it cannot, it says why in RolloutHealthy and
// the canary is not started (a canary without traffic cannot be judged).
func (r *AgentDeploymentReconciler) trafficReady(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) bool {
	t := ad.Spec.Rollout.Traffic
	reason, msg := "", ""
	switch {
	case t == nil:
		reason, msg = reasonNoTrafficRoute, "spec.rollout.traffic is not set: no route can send the canary traffic, so it is not started"
	case !r.Canary.routes:
		reason, msg = reasonNoGatewayAPI, "the Gateway API HTTPRoute CRD is not installed: the canary is not started"
	case t.RouteName != "":
		err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: t.RouteName}, newRoute())
		if apierrors.IsNotFound(err) {
			reason, msg = reasonRouteMissing, fmt.Sprintf("spec.rollout.traffic.routeName: HTTPRoute %q not found; the canary is not started", t.RouteName)
		}
	}
	if reason == "" {
		return true
	}
	old := meta.FindStatusCondition(ad.Status.Conditions, agentraxv1alpha1.ConditionRolloutHealthy)
	if old == nil || old.Reason != reason {
		r.Recorder.Eventf(ad, nil, corev1.EventTypeWarning, reason, "Rollout", "%s", msg)
	}
	setCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy, metav1.ConditionUnknown, reason, msg)
	return false
}

// rolloutSpec maps the AgentDeployment spec and the manager's flags onto rollout.Spec.
func (r *AgentDeploymentReconciler) rolloutSpec(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (rollout.Spec, error) {
	spec := rollout.Spec{Image: ad.Spec.Image, Canary: isCanary(ad), FailsafeTimeout: r.Canary.FailsafeTimeout,
		AnalysisInterval: r.Canary.AnalysisInterval, Retry: ad.Annotations[agentraxv1alpha1.AnnotationRetryRollout]}
	if ro := ad.Spec.Rollout; ro != nil {
		spec.Abort = ro.Abort
		if ro.ProgressDeadline != nil {
			// Zero (an object stored before the field) takes rollout.DefaultProgressDeadline.
			spec.ProgressDeadline = ro.ProgressDeadline.Duration
		}
		for _, s := range ro.Steps {
			switch {
			case s.SetWeight != nil:
				spec.Steps = append(spec.Steps, rollout.Step{SetWeight: ptr.To(*s.SetWeight)})
			case s.Pause != nil:
				spec.Steps = append(spec.Steps, rollout.Step{Pause: s.Pause.Duration.Duration})
			}
		}
		if rb := ro.Rollback; rb != nil {
			rate, err := quota.ParseErrorRate(rb.MaxErrorRate)
			if err != nil {
				// Admission refuses this; a stored object from before the rule gets the strictest reading.
				rate = 0
			}
			spec.Thresholds = rollout.Thresholds{MaxErrorRate: rate,
				MaxP99: time.Duration(rb.MaxP99LatencyMs) * time.Millisecond, MinRequestSample: int64(rb.MinRequestSample)}
			spec.InsufficientSamples = rollout.InsufficientPolicy(rb.OnInsufficientSamples)
		}
	}
	if spec.Canary {
		limit, err := r.canaryReplicaLimit(ctx, ad)
		if err != nil {
			return spec, err
		}
		spec.CanaryReplicaLimit = limit
	}
	return spec, nil
}

// canaryReplicaLimit is what the agent's quota reservation holds beyond replicas.max: admission charged the
// canary's largest size there (quota.CanaryReplicas), and the canary never grows past what was charged. Nil
// (no limit) when the TenantQuota does not exist.
func (r *AgentDeploymentReconciler) canaryReplicaLimit(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (*int32, error) {
	tq := &agentraxv1alpha1.TenantQuota{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: ad.Spec.TenantRef}, tq)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	reservations, err := quota.ParseLedger(tq.Status.Ledger)
	if err != nil {
		// An unreadable ledger is rebuilt by the TenantQuota controller; no canary pod until then.
		return ptr.To[int32](0), nil
	}
	i := quota.Find(reservations, ad.Name)
	if i < 0 {
		// Not reserved yet (the TenantQuota controller settles it): no canary pod until it is.
		return ptr.To[int32](0), nil
	}
	return ptr.To(max(reservations[i].Replicas-ad.Spec.Replicas.Max, 0)), nil
}

// observeCanary gathers what Decide needs: the stable and canary Deployments, the route, and, while a pause
// runs, the analysis of the canary over the window that began with the pause.
func (r *AgentDeploymentReconciler) observeCanary(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, obs *observed,
	spec rollout.Spec, st rollout.Status, now time.Time) (rollout.Observation, error) {
	o := rollout.Observation{Now: now}
	if dep := obs.deployment; dep != nil {
		if c := agentContainer(&dep.Spec.Template.Spec); c != nil {
			o.StableImage = c.Image
		}
		o.StableRolledOut = rolledOut(dep)
		o.StableReplicas = ptr.Deref(dep.Spec.Replicas, 1)
	}
	if st.Stage == rollout.StageIdle {
		// Nothing of the canary exists or matters before it starts; spare the reads.
		return o, nil
	}
	canary := &appsv1.Deployment{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: canaryName(ad)}, canary); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return o, err
	default:
		o.Canary = rollout.CanaryObservation{Present: canary.DeletionTimestamp == nil,
			Replicas: ptr.Deref(canary.Spec.Replicas, 1), RolledOut: rolledOut(canary),
			AvailableReplicas: canary.Status.AvailableReplicas}
		crashed, err := r.crashedCanaryPod(ctx, ad)
		if err != nil {
			return o, err
		}
		o.Canary.Unavailable = canary.Status.AvailableReplicas < 1 || crashed
		if c := agentContainer(&canary.Spec.Template.Spec); c != nil {
			o.Canary.Image = c.Image
		}
	}
	route, err := r.observeRoute(ctx, ad)
	if err != nil {
		return o, err
	}
	o.Route = route
	if w, ok := rollout.AnalysisWindow(spec, st, now); ok {
		o.Analysis = r.analyze(ctx, ad, w, now)
	}
	return o, nil
}

func (r *AgentDeploymentReconciler) analyze(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, window time.Duration, now time.Time) rollout.Analysis {
	if r.Canary.Prometheus == nil {
		return rollout.Analysis{Outcome: rollout.QueryFailed, Window: window,
			Err: "no Prometheus is configured (--prometheus-url): the canary cannot be judged"}
	}
	var m rollout.Metrics
	// spec.rollout is defaulted by the webhook; a nil one (webhook bypassed) queries the default metric names.
	if ad.Spec.Rollout != nil && ad.Spec.Rollout.Metrics != nil {
		s := ad.Spec.Rollout.Metrics
		m = rollout.Metrics{Requests: s.Requests, DurationBucket: s.DurationBucket, CodeLabel: s.CodeLabel,
			VariantLabel: s.VariantLabel, AppLabel: s.AppLabel, NamespaceLabel: s.NamespaceLabel}
	}
	if err := m.Validate(); err != nil {
		return rollout.Analysis{Outcome: rollout.QueryFailed, Window: window, Err: "spec.rollout.metrics: " + err.Error()}
	}
	t := rollout.Target{Namespace: ad.Namespace, Name: ad.Name, Variant: agentraxv1alpha1.VariantCanary}
	return r.Canary.Prometheus.Analyze(ctx, m, t, window, now)
}

// rolledOut: the Deployment controller has seen the latest spec and every desired pod is updated and available.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= want && s.AvailableReplicas >= want &&
		s.Replicas == s.UpdatedReplicas
}

// crashedCanaryPod tells whether a canary pod's container crashed and is not ready (restarted, waiting in
// CrashLoopBackOff, or terminated): a canary whose pods crash is unhealthy even while others still serve, and a
// pod still starting (not ready, never restarted) is not counted, so scaling the canary never reads as a crash.
func (r *AgentDeploymentReconciler) crashedCanaryPod(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	if r.pods == nil {
		return false, nil
	}
	pods := &corev1.PodList{}
	if err := r.pods.List(ctx, pods, client.InNamespace(ad.Namespace), client.MatchingLabels{
		agentraxv1alpha1.LabelName: ad.Name, agentraxv1alpha1.LabelVariant: agentraxv1alpha1.VariantCanary}); err != nil {
		return false, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			w := cs.State.Waiting
			if !cs.Ready && (cs.RestartCount > 0 || cs.State.Terminated != nil || (w != nil && w.Reason == "CrashLoopBackOff")) {
				return true, nil
			}
		}
	}
	return false, nil
}

// act carries out one action; each is idempotent, so a replayed decision is harmless.
func (r *AgentDeploymentReconciler) act(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, obs *observed, a rollout.Action) error {
	switch a.Kind {
	case rollout.ActionEnsureCanary:
		return r.ensureCanary(ctx, ad, a.Image, a.Replicas)
	case rollout.ActionScaleCanary:
		dep := &appsv1.Deployment{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: canaryName(ad)}, dep); err != nil {
			return err
		}
		patch := client.MergeFrom(dep.DeepCopy())
		dep.Spec.Replicas = ptr.To(a.Replicas)
		return r.Patch(ctx, dep, patch)
	case rollout.ActionSetWeights:
		return r.setWeights(ctx, ad, a.StableWeight, a.CanaryWeight)
	case rollout.ActionSetStableImage:
		dep := obs.deployment
		if dep == nil {
			// Not created yet (or deleted): reconcileDeployment writes the image the status names.
			return nil
		}
		c := agentContainer(&dep.Spec.Template.Spec)
		if c == nil || c.Image == a.Image {
			return nil
		}
		patch := client.MergeFrom(dep.DeepCopy())
		c.Image = a.Image
		return r.Patch(ctx, dep, patch)
	case rollout.ActionDeleteCanary:
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			o.SetNamespace(ad.Namespace)
			o.SetName(canaryName(ad))
			if err := r.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil
	case rollout.ActionRestoreHPA:
		return r.reconcileHPA(ctx, ad, obs)
	case rollout.ActionRegister:
		if ad.Spec.MCP == nil || !ad.Spec.MCP.Expose {
			return nil
		}
		// The new image may offer other tools. A registry failure does not hold the promotion back: the
		// registration phase retries on every reconcile and reports MCPHandshakeFailed.
		if _, err := r.Registrar.Register(ctx, ad); err != nil {
			r.Recorder.Eventf(ad, nil, corev1.EventTypeWarning, "RegisterFailed", "Rollout",
				"re-registering the promoted image with the MCP registry: %v", err)
		}
		return nil
	}
	return fmt.Errorf("unknown rollout action %q", a.Kind)
}

// ensureCanary creates or repairs the canary Deployment and Service, labelled agentrax.io/variant=canary. The
// canary is not autoscaled: the rollout sizes it from the weight and the stable replica count.
func (r *AgentDeploymentReconciler) ensureCanary(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, image string, replicas int32) error {
	labels := canaryLabels(ad)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: canaryName(ad)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		dep.Labels = mergeLabels(dep.Labels, labels)
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(ad, agentraxv1alpha1.VariantCanary)}
		}
		dep.Spec.Replicas = ptr.To(replicas)
		dep.Spec.Template.Labels = mergeLabels(dep.Spec.Template.Labels, labels)
		writeAgentPod(&dep.Spec.Template.Spec, ad, image)
		return controllerutil.SetControllerReference(ad, dep, r.Scheme())
	}); err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: canaryName(ad)}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		svc.Labels = mergeLabels(svc.Labels, labels)
		svc.Spec.Selector = selectorLabels(ad, agentraxv1alpha1.VariantCanary)
		svc.Spec.Ports = []corev1.ServicePort{{
			Name: portName, Port: ad.Spec.Port, TargetPort: intstr.FromString(portName), Protocol: corev1.ProtocolTCP,
		}}
		return controllerutil.SetControllerReference(ad, svc, r.Scheme())
	})
	return err
}

func canaryLabels(ad *agentraxv1alpha1.AgentDeployment) map[string]string {
	l := childLabels(ad)
	l[agentraxv1alpha1.LabelVariant] = agentraxv1alpha1.VariantCanary
	return l
}

// rolloutStatus reads the persisted rollout state out of the AgentDeployment status.
func rolloutStatus(ad *agentraxv1alpha1.AgentDeployment) rollout.Status {
	s := ad.Status
	st := rollout.Status{Phase: rollout.Phase(s.Phase), Stage: rollout.Stage(s.Stage), StableVersion: s.StableVersion,
		CanaryVersion: s.CanaryVersion, CanaryWeight: s.CanaryWeight, CanaryStepIndex: s.CanaryStepIndex,
		BaselineReplicas: s.BaselineReplicas, AbortedVersion: s.AbortedVersion, AbortLatched: s.AbortLatched,
		Retried: s.RetriedRollout}
	if s.PauseStartedAt != nil {
		st.PauseStartedAt = s.PauseStartedAt.Time
	}
	if s.PromUnreachableSince != nil {
		st.PromUnreachableSince = s.PromUnreachableSince.Time
	}
	if s.WaitingSince != nil {
		st.WaitingSince = s.WaitingSince.Time
	}
	for _, t := range []string{rollout.ConditionRolloutHealthy, rollout.ConditionSampleInsufficient} {
		if c := meta.FindStatusCondition(s.Conditions, t); c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
	}
	return st
}

// applyRolloutStatus writes a decided rollout state back. The phase is taken only where the rollout owns it;
// otherwise summarize derives it from the stable Deployment.
func applyRolloutStatus(ad *agentraxv1alpha1.AgentDeployment, st rollout.Status) {
	s := &ad.Status
	switch p := agentraxv1alpha1.Phase(st.Phase); {
	case p == agentraxv1alpha1.PhaseRolloutInProgress || p == agentraxv1alpha1.PhaseRolloutFailed:
		s.Phase = p
	case s.Phase == agentraxv1alpha1.PhaseRolloutInProgress || s.Phase == agentraxv1alpha1.PhaseRolloutFailed:
		s.Phase = agentraxv1alpha1.PhaseRunning
	}
	s.Stage = agentraxv1alpha1.RolloutStage(st.Stage)
	s.StableVersion, s.CanaryVersion = st.StableVersion, st.CanaryVersion
	s.CanaryWeight, s.CanaryStepIndex, s.BaselineReplicas = st.CanaryWeight, st.CanaryStepIndex, st.BaselineReplicas
	s.AbortedVersion, s.AbortLatched, s.RetriedRollout = st.AbortedVersion, st.AbortLatched, st.Retried
	s.PauseStartedAt = timeOrNil(st.PauseStartedAt)
	s.PromUnreachableSince = timeOrNil(st.PromUnreachableSince)
	s.WaitingSince = timeOrNil(st.WaitingSince)
	for _, c := range st.Conditions {
		setCondition(ad, c.Type, c.Status, c.Reason, c.Message)
	}
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

// httpRouteGVK is probed once at setup: without the Gateway API, canaries are not started (RolloutHealthy says
// why) and nothing watches routes.
var httpRouteGVK = schema.GroupVersion{Group: gatewayv1.GroupVersion.Group, Version: gatewayv1.GroupVersion.Version}.WithKind("HTTPRoute")

// setupCanary watches HTTPRoutes when the CRD exists: the owned route through its controller reference, a
// user-owned one through the spec.rollout.traffic.routeName index, so a Gateway accepting new weights wakes the
// rollout at once.
func (r *AgentDeploymentReconciler) setupCanary(ctx context.Context, mgr ctrl.Manager, b *builder.Builder) error {
	if r.Canary.APIReader == nil {
		r.Canary.APIReader = mgr.GetAPIReader()
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(httpRouteGVK.GroupKind(), httpRouteGVK.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("probing for the HTTPRoute CRD: %w", err)
	}
	r.Canary.routes = true
	if err := kube.IndexField(ctx, mgr, &agentraxv1alpha1.AgentDeployment{}, routeNameField, routeNameOf); err != nil {
		return err
	}
	b.Watches(&gatewayv1.HTTPRoute{}, handler.EnqueueRequestsFromMapFunc(r.agentsOfRoute))
	return nil
}

func (r *AgentDeploymentReconciler) agentsOfRoute(ctx context.Context, route client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if owner := metav1.GetControllerOf(route); owner != nil && owner.Kind == "AgentDeployment" &&
		owner.APIVersion == agentraxv1alpha1.GroupVersion.String() {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: route.GetNamespace(), Name: owner.Name}})
	}
	ads := &agentraxv1alpha1.AgentDeploymentList{}
	if err := r.List(ctx, ads, client.InNamespace(route.GetNamespace()), client.MatchingFields{routeNameField: route.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing AgentDeployments of HTTPRoute", "httpRoute", route.GetName())
		return reqs
	}
	for i := range ads.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ads.Items[i])})
	}
	return reqs
}
