package gnmic

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/placement"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// ClusterControllerName is the controller name, unique across groups.
const ClusterControllerName = "gnmic-cluster"

const (
	clusterFinalizer  = "operator.gnmic.dev/cluster"
	pipelineClusterIx = "spec.clusterRef"
	// applyTimeout bounds one POST /api/v1/config/apply.
	applyTimeout = 30 * time.Second
)

// ClusterReconciler runs a Cluster's collectors and pushes the plan of its enabled Pipelines to them.
type ClusterReconciler struct {
	client.Client
	// DefaultImage is the collector image of Clusters that name none (--gnmic-default-image).
	DefaultImage string
	// APIReader reads credentials Secrets straight from the API server (no Secret cache).
	APIReader  client.Reader
	Recorder   recorder.EventRecorder
	Collectors *collector.Client
	Monitor    *collector.Monitor
	// ClusterDomain is the cluster's DNS domain (default cluster.local).
	ClusterDomain string
	// OperatorNamespace is the operator's own namespace: the collectors' REST API admits only the operator's pods
	// there (NetworkPolicy gnmic-<cluster>-api); empty admits them in any namespace.
	OperatorNamespace string
	// CertificateWait is how long a cert-manager Certificate may stay unissued before CertificatesReady says
	// CertificateTimedOut (DefaultCertificateWait when zero).
	CertificateWait time.Duration
	// PlatformAssignsUID is true on clusters that assign pod UIDs themselves (OpenShift, detected through the
	// security.openshift.io API group): collector pods then name no UID unless spec.podTemplate asks.
	PlatformAssignsUID bool
	// TargetTLSPropagation is how long a file newly added to the target-tls Secret is held back from the push
	// (DefaultTargetTLSPropagation when zero): see ensureTargetTLS.
	TargetTLSPropagation time.Duration

	events  chan event.GenericEvent
	mu      sync.Mutex
	applied map[ktypes.NamespacedName]map[int]string
	// missing remembers when a collector pod was first found missing, for its grace period.
	missing map[ktypes.NamespacedName]map[int]time.Time
}

// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=gnmicpipelines;gnmicsubscriptions;gnmicoutputs;gnmicinputs;gnmicprocessors;gnmictunneltargetpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targets;targetprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Cluster, builds its plan, deploys the collectors, pushes each pod its share and writes
// the per-target results, then patches the Cluster status once.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &gnmicv1alpha1.Cluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, c)
	}
	if controllerutil.AddFinalizer(c, clusterFinalizer) {
		if err := r.Update(ctx, c); err != nil {
			return ctrl.Result{}, err
		}
	}
	// After the finalizer's Update, which would store it: the default is never written into the spec, so an
	// operator upgrade moves the collectors to its new default.
	defaultImage(c, r.DefaultImage)
	before := c.DeepCopy()
	snap, err := r.snapshot(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.setCredentialsCondition(c, snap.CredentialsWithheld)
	tls, wait, pushErr := r.certificates(ctx, c)
	var settle, graceLeft time.Duration
	var devices *deviceTLS
	if pushErr == nil && wait == 0 {
		if devices, pushErr = r.ensureTargetTLS(ctx, c, snap.Profiles); pushErr == nil {
			snap.TargetTLS, snap.HeldBack, settle = devices.inUse, devices.heldBack, devices.settle
			r.setTargetTLSCondition(c, snap.HeldBack, devices.lastGood)
			r.setCredentialsMissingCondition(c, snap.CredentialsMissing)
			for profile, why := range snap.CredentialsMissing {
				snap.HeldBack[profile] = why
			}
		}
	}
	p := plan.Build(snap)
	if err := r.recordOutputInstances(ctx, c, before, p.OutputInstances); err != nil {
		return ctrl.Result{}, err
	}
	if pushErr == nil && wait == 0 {
		graceLeft, pushErr = r.sync(ctx, c, snap, p, tls)
		if pushErr == nil && meta.IsStatusConditionTrue(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied) {
			// Every pod has the configuration: files only an older one named can go.
			pushErr = r.targetTLSPushed(ctx, c, devices)
		}
	}
	c.Status.ObservedGeneration = c.Generation
	if err := kube.PatchStatusIfChanged(ctx, r.Client, before, c); err != nil {
		return ctrl.Result{}, err
	}
	res := ctrl.Result{RequeueAfter: wait}
	if at := tls.renewAt(); pushErr == nil && !at.IsZero() {
		// Come back when the serving certificate is due for renewal.
		res.RequeueAfter = max(time.Until(at), time.Second)
	}
	if settle > 0 && pushErr == nil && (res.RequeueAfter == 0 || settle < res.RequeueAfter) {
		// Come back when held-back device TLS files have reached the pods.
		res.RequeueAfter = settle
	}
	if graceLeft > 0 && pushErr == nil && (res.RequeueAfter == 0 || graceLeft < res.RequeueAfter) {
		// Come back when an unready pod's grace period ends, to place its targets elsewhere.
		res.RequeueAfter = graceLeft
	}
	return res, pushErr
}

// sync deploys the collectors, places and pushes the targets, and records everything in c.Status. It returns when
// to look again for a pod whose grace period is running (0: no such pod).
func (r *ClusterReconciler) sync(ctx context.Context, c *gnmicv1alpha1.Cluster, snap plan.Snapshot, p *plan.Plan, tls *clusterCerts) (time.Duration, error) {
	key := client.ObjectKeyFromObject(c)
	replicas := int(c.DesiredReplicas())
	targets := slices.Sorted(maps.Keys(p.Config.Targets))
	previous := map[string]int{}
	for i := range snap.Targets {
		t := &snap.Targets[i]
		if st, ok := t.Status.ClusterStates[c.Name]; ok {
			if idx := podIndex(c, st.Pod); idx >= 0 {
				previous[plan.Name(t.Namespace, t.Name)] = idx
			}
		}
	}
	capacity := 0
	if d := c.Spec.TargetDistribution; d != nil && d.PodCapacity != nil {
		capacity = int(*d.PodCapacity)
	}

	enabled := 0
	for _, res := range p.Pipelines {
		if res.Enabled {
			enabled++
		}
	}
	c.Status.Replicas = int32(replicas)
	c.Status.Selector = metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: podLabels(c)})
	c.Status.PipelinesCount = int32(enabled)
	c.Status.SubscriptionsCount = int32(len(p.Config.Subscriptions))
	c.Status.InputsCount = int32(len(p.Config.Inputs))
	c.Status.OutputsCount = int32(len(p.Config.Outputs))
	setFeaturesCondition(c, p)

	// Pods beyond the new size keep running until they were drained.
	current := &appsv1.StatefulSet{}
	stsReplicas := int32(replicas)
	if err := r.Get(ctx, ktypes.NamespacedName{Namespace: c.Namespace, Name: clusterResourceName(c)}, current); err == nil &&
		current.Spec.Replicas != nil && *current.Spec.Replicas > stsReplicas {
		stsReplicas = *current.Spec.Replicas
	}
	sts, err := r.ensureResources(ctx, c, p, stsReplicas, tls)
	if err != nil {
		return 0, err
	}
	c.Status.ReadyReplicas = sts.Status.ReadyReplicas
	pods := int(stsReplicas)
	urls := r.collectorURLs(c, pods)
	if err := r.trustCollectors(tls, c, urls); err != nil {
		return 0, err
	}
	health, graceLeft, err := r.collectorPodHealth(ctx, c, pods)
	if err != nil {
		return 0, err
	}
	// Targets of a pod unready past the grace period go to the ready pods (minimal moves: the others' targets stay).
	placed := placement.Place(placement.Input{Targets: targets, Pods: replicas, PodCapacity: capacity, Previous: previous,
		Unavailable: unavailable(health, replicas, previous)})
	c.Status.TargetsCount = int32(len(placed.Assignments))
	c.Status.UnassignedTargets = int32(len(placed.Unassigned))
	r.setCapacityCondition(c, placed)
	r.Monitor.Ensure(key, r.collectorURLs(c, replicas))

	// Every ready pod gets its plan whatever the state of the others.
	errs := r.push(ctx, c, p, placed, previous, pods, urls, health)
	statuses, notCollected := podStatuses(c, health, replicas, placed.Assignments, errs)
	c.Status.Pods = statuses
	c.Status.TargetsNotCollected = int32(notCollected + len(placed.Unassigned))
	recordClusterGauges(c)
	pushErr := errors.Join(errs...)
	readyPods, configured := 0, 0
	for i := range replicas {
		if health[i].ready {
			readyPods++
			if errs[i] == nil {
				configured++
			}
		}
	}
	switch {
	case pushErr != nil:
		r.setApplied(c, metav1.ConditionFalse, gnmicv1alpha1.ReasonConfigurationFailed, pushErr.Error())
		r.setReady(c, false)
		if !meta.IsStatusConditionFalse(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied) ||
			meta.FindStatusCondition(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied).Reason != gnmicv1alpha1.ReasonConfigurationFailed {
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, gnmicv1alpha1.ReasonConfigurationFailed, "Apply", pushErr.Error())
		}
	case configured < replicas:
		r.setApplied(c, metav1.ConditionFalse, gnmicv1alpha1.ReasonWaitingForPods,
			fmt.Sprintf("%d of %d collector pods ready and configured (%d targets not collected)", configured, replicas, c.Status.TargetsNotCollected))
		r.setReady(c, false)
	default:
		drained := true
		for i := replicas; i < pods; i++ {
			drained = drained && (errs[i] == nil || !health[i].ready)
		}
		if int(stsReplicas) > replicas && drained { // drained: now shrink the StatefulSet
			sts.Spec.Replicas = ptrTo(int32(replicas))
			if err := r.Update(ctx, sts); err != nil {
				return 0, err
			}
			r.dropPodsFrom(key, replicas)
		}
		r.setApplied(c, metav1.ConditionTrue, gnmicv1alpha1.ReasonConfigurationApplied,
			fmt.Sprintf("%d targets on %d pods", len(placed.Assignments), replicas))
		r.setReady(c, true)
	}
	if err := r.writeTargetStates(ctx, c, snap.Targets, placed.Assignments, r.Monitor.States(key)); err != nil {
		return 0, errors.Join(pushErr, err)
	}
	return graceLeft, pushErr
}

// recordOutputInstances writes the plan's output instances (the names the collectors are about to run) into
// status.outputInstances before anything is pushed, so the next plans derive their names from what the
// collectors hold. The write has the resourceVersion as precondition: the names were derived from the recorded
// ones, and a reconcile reading a cache older than the previous reconcile's write would otherwise push (and
// record) names derived from stale records; it gets 409 and is retried on the newer object. before is the
// stored object (without this pass's unsaved status changes) and follows the write, so the final status patch
// neither repeats it nor carries a resourceVersion.
func (r *ClusterReconciler) recordOutputInstances(ctx context.Context, c, before *gnmicv1alpha1.Cluster, instances []gnmicv1alpha1.OutputInstance) error {
	if len(instances) == 0 && len(c.Status.OutputInstances) == 0 || equality.Semantic.DeepEqual(c.Status.OutputInstances, instances) {
		return nil
	}
	stored := before.DeepCopy()
	stored.Status.OutputInstances = slices.Clone(instances)
	if err := kube.PatchStatusIfChangedOptimistic(ctx, r.Client, before, stored); err != nil {
		return fmt.Errorf("recording output instances: %w", err)
	}
	before.Status.OutputInstances = slices.Clone(instances)
	c.Status.OutputInstances = slices.Clone(instances)
	before.ResourceVersion, c.ResourceVersion = stored.ResourceVersion, stored.ResourceVersion
	return nil
}

// Invalidate forgets what was applied to a pod, so the next reconcile sends its plan again.
func (r *ClusterReconciler) Invalidate(cluster ktypes.NamespacedName, pod int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.applied[cluster], pod)
}

func (r *ClusterReconciler) dropPodsFrom(cluster ktypes.NamespacedName, from int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.applied[cluster] {
		if i >= from {
			delete(r.applied[cluster], i)
		}
	}
}

func (r *ClusterReconciler) forget(cluster ktypes.NamespacedName) {
	r.Monitor.Stop(cluster)
	r.Collectors.Forget(cluster.String())
	forgetClusterMetrics(cluster)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.applied, cluster)
	delete(r.missing, cluster)
}

// collectorURLs returns the REST base URL of pods 0..n-1, by pod DNS name. In development and tests the
// connections are sent to local stand-ins by the HTTP client's dialer (internal/devdial), never by these URLs.
func (r *ClusterReconciler) collectorURLs(c *gnmicv1alpha1.Cluster, n int) map[int]string {
	scheme := "http"
	if apiTLSEnabled(c) {
		scheme = "https"
	}
	urls := make(map[int]string, n)
	for i := range n {
		urls[i] = scheme + "://" + c.CollectorPodAddress(i, r.ClusterDomain)
	}
	return urls
}

// writeTargetStates sets Target.status.clusterStates[cluster] for every target of the namespace: the pod and
// what that pod reports for placed targets, nothing for the others. Only changed Targets are written.
func (r *ClusterReconciler) writeTargetStates(ctx context.Context, c *gnmicv1alpha1.Cluster, targets []gnmicv1alpha1.Target,
	assignments map[string]int, states map[int]map[string]collector.TargetState) error {
	work := make(chan *gnmicv1alpha1.Target)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range work {
				if err := r.writeTargetState(ctx, c, t, assignments, states); err != nil && !apierrors.IsNotFound(err) {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range targets {
		work <- &targets[i]
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func (r *ClusterReconciler) writeTargetState(ctx context.Context, c *gnmicv1alpha1.Cluster, t *gnmicv1alpha1.Target,
	assignments map[string]int, states map[int]map[string]collector.TargetState) error {
	name := plan.Name(t.Namespace, t.Name)
	pod, placed := assignments[name]
	_, had := t.Status.ClusterStates[c.Name]
	if !placed && !had {
		return nil
	}
	before := t.DeepCopy()
	if !placed {
		delete(t.Status.ClusterStates, c.Name)
	} else {
		want := gnmicv1alpha1.ClusterTargetState{Pod: podName(c, pod)}
		if st, ok := states[pod][name]; ok {
			want.State, want.FailedReason, want.ConnectionState = st.State, st.FailedReason, st.ConnectionState
			if len(st.Subscriptions) > 0 {
				want.Subscriptions = maps.Clone(st.Subscriptions)
			}
			if !st.LastUpdated.IsZero() {
				lu := metav1.NewTime(st.LastUpdated.UTC().Truncate(1e9))
				want.LastUpdated = &lu
			}
		}
		if t.Status.ClusterStates == nil {
			t.Status.ClusterStates = map[string]gnmicv1alpha1.ClusterTargetState{}
		}
		t.Status.ClusterStates[c.Name] = want
	}
	return kube.PatchStatusIfChanged(ctx, r.Client, before, t)
}

// finalize removes the Cluster's entries from Target status and stops following its pods.
func (r *ClusterReconciler) finalize(ctx context.Context, c *gnmicv1alpha1.Cluster) error {
	if !controllerutil.ContainsFinalizer(c, clusterFinalizer) {
		return nil
	}
	targets := &gnmicv1alpha1.TargetList{}
	if err := r.List(ctx, targets, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	if err := r.writeTargetStates(ctx, c, targets.Items, nil, nil); err != nil {
		return err
	}
	r.forget(client.ObjectKeyFromObject(c))
	controllerutil.RemoveFinalizer(c, clusterFinalizer)
	return r.Update(ctx, c)
}

func ptrTo[T any](v T) *T { return &v }

func result(err error) string {
	if err != nil {
		return applyFailure
	}
	return applySuccess
}

// SetupWithManager registers the controller and its watches.
func (r *ClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.GnmicPipeline{}, pipelineClusterIx, func(o client.Object) []string {
		return []string{o.(*gnmicv1alpha1.GnmicPipeline).Spec.ClusterRef}
	}); err != nil {
		return err
	}
	if err := indexProfileReferences(ctx, mgr); err != nil {
		return err
	}
	r.events = make(chan event.GenericEvent, 1024)
	r.Monitor.Changed = func(cluster ktypes.NamespacedName) {
		c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}}
		r.events <- event.GenericEvent{Object: c}
	}
	r.Monitor.Dropped = r.Invalidate
	toClusters := handler.EnqueueRequestsFromMapFunc(r.clustersInNamespace)
	specOrLabels := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))
	return ctrl.NewControllerManagedBy(mgr).
		Named(ClusterControllerName).
		For(&gnmicv1alpha1.Cluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&gnmicv1alpha1.GnmicPipeline{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueueT) {
				q.Add(pipelineCluster(e.Object))
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueueT) {
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
					q.Add(pipelineCluster(e.ObjectOld))
					q.Add(pipelineCluster(e.ObjectNew))
				}
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueueT) {
				q.Add(pipelineCluster(e.Object))
			},
		}).
		Watches(&gnmicv1alpha1.Target{}, toClusters, specOrLabels).
		Watches(&gnmicv1alpha1.TargetProfile{}, toClusters, specOrLabels).
		Watches(&gnmicv1alpha1.Subscription{}, toClusters, specOrLabels).
		Watches(&gnmicv1alpha1.Output{}, toClusters, specOrLabels).
		Watches(&gnmicv1alpha1.Input{}, toClusters, specOrLabels).
		Watches(&gnmicv1alpha1.Processor{}, toClusters, specOrLabels).
		Watches(&gnmicv1alpha1.TunnelTargetPolicy{}, toClusters, specOrLabels).
		WatchesMetadata(metadataOf("Secret"), r.referencedToClusters(profileSecretsIx)).
		WatchesMetadata(metadataOf("Secret"), handler.EnqueueRequestsFromMapFunc(labelledClusterOf)).
		WatchesMetadata(metadataOf("ConfigMap"), r.referencedToClusters(profileConfigMapsIx)).
		WatchesRawSource(source.Channel(r.events, &handler.EnqueueRequestForObject{})).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(ClusterControllerName, r))
}

func pipelineCluster(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: ktypes.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*gnmicv1alpha1.GnmicPipeline).Spec.ClusterRef}}
}

// clustersInNamespace maps any object of a namespace to every Cluster a Pipeline there refers to.
func (r *ClusterReconciler) clustersInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	pipelines := &gnmicv1alpha1.GnmicPipelineList{}
	if err := r.List(ctx, pipelines, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Pipelines")
		return nil
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	for i := range pipelines.Items {
		ref := pipelines.Items[i].Spec.ClusterRef
		if !seen[ref] {
			seen[ref] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: ktypes.NamespacedName{Namespace: o.GetNamespace(), Name: ref}})
		}
	}
	return reqs
}
