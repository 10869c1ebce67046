package agentrax

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Reasons of the ImagePullFailed condition: True carries the kubelet's waiting reason (ErrImagePull,
// ImagePullBackOff), False this one.
const reasonImagesPulled = "ImagesPulled"

// imagePullReasons are the container waiting reasons that mean the image cannot be pulled.
var imagePullReasons = []string{"ErrImagePull", "ImagePullBackOff"}

// setupPodCache starts a Pod cache of its own, scoped to agent pods (agentrax.io/agent=true): the manager's
// cache would otherwise hold every pod of the cluster (and other groups may read pods with other scopes). A pod
// entering or leaving an image-pull failure wakes its agent.
func (r *AgentDeploymentReconciler) setupPodCache(mgr ctrl.Manager, b *builder.Builder) error {
	sel := labels.SelectorFromSet(labels.Set{agentraxv1alpha1.LabelAgent: "true"})
	pods, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: sel}}})
	if err != nil {
		return fmt.Errorf("creating the agent pod cache: %w", err)
	}
	if err := mgr.Add(pods); err != nil {
		return err
	}
	r.pods = pods
	b.WatchesRawSource(source.Kind(pods, &corev1.Pod{},
		handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, p *corev1.Pod) []reconcile.Request {
			name := p.Labels[agentraxv1alpha1.LabelName]
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: name}}}
		}),
		// Only changes of the image-pull state matter here (the Deployments' own watches cover availability): a
		// pod created or deleted while failing, or one entering or leaving a failure.
		predicate.TypedFuncs[*corev1.Pod]{
			CreateFunc: func(e event.TypedCreateEvent[*corev1.Pod]) bool { return imagePullFailure(e.Object) != "" },
			DeleteFunc: func(e event.TypedDeleteEvent[*corev1.Pod]) bool { return imagePullFailure(e.Object) != "" },
			UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Pod]) bool {
				return imagePullFailure(e.ObjectOld) != imagePullFailure(e.ObjectNew)
			},
			GenericFunc: func(event.TypedGenericEvent[*corev1.Pod]) bool { return false },
		}))
	return nil
}

// imagePullFailure describes the first container of pod that cannot pull its image; empty when none.
func imagePullFailure(pod *corev1.Pod) string {
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && slices.Contains(imagePullReasons, w.Reason) {
			return w.Reason + "\x00" + fmt.Sprintf("pod %s, container %s, image %s: %s", pod.Name, cs.Name, cs.Image,
				strings.TrimSpace(w.Message))
		}
	}
	return ""
}

// reconcileImagePull sets ImagePullFailed from the container statuses of the agent's stable and canary pods,
// and clears it once none of them is failing to pull.
func (r *AgentDeploymentReconciler) reconcileImagePull(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, _ *observed) error {
	if r.pods == nil {
		return nil
	}
	pods := &corev1.PodList{}
	if err := r.pods.List(ctx, pods, client.InNamespace(ad.Namespace),
		client.MatchingLabels{agentraxv1alpha1.LabelName: ad.Name, agentraxv1alpha1.LabelAgent: "true"}); err != nil {
		return err
	}
	var failing []string
	reason := ""
	for i := range pods.Items {
		if f := imagePullFailure(&pods.Items[i]); f != "" {
			r, msg, _ := strings.Cut(f, "\x00")
			reason = cmp.Or(reason, r)
			failing = append(failing, msg)
		}
	}
	if len(failing) == 0 {
		setCondition(ad, agentraxv1alpha1.ConditionImagePullFailed, metav1.ConditionFalse, reasonImagesPulled,
			"no pod of the agent is failing to pull its image")
		return nil
	}
	slices.Sort(failing)
	msg := strings.Join(failing, "; ")
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	setCondition(ad, agentraxv1alpha1.ConditionImagePullFailed, metav1.ConditionTrue, reason, msg)
	return nil
}
