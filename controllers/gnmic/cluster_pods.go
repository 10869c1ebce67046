package gnmic

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// podHealth is what the controller knows of one collector pod before pushing.
type podHealth struct {
	ready bool
	// unreadySince is when the pod turned unready (its Ready condition's transition, its creation, or when the
	// controller first found it missing); zero while ready.
	unreadySince time.Time
	// evacuated: unready past the grace period, so placement leaves it out.
	evacuated bool
	// plainHTTP: the Cluster's API is TLS but this pod was started from a template without it (it carries no
	// REST API certificate annotation): it serves plain HTTP until the StatefulSet's roll replaces it, and is
	// sent nothing meanwhile (see push).
	plainHTTP bool
}

// collectorPodHealth reads the Ready condition of pods 0..n-1 straight from the API server (one List; the manager
// caches no Pods) and decides which are unready past the Cluster's grace period. It also returns how long until the
// next pod's grace period ends (0 when none is running).
func (r *ClusterReconciler) collectorPodHealth(ctx context.Context, c *gnmicv1alpha1.Cluster, n int) ([]podHealth, time.Duration, error) {
	list := &corev1.PodList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(podLabels(c))); err != nil {
		return nil, 0, err
	}
	byIndex := map[int]*corev1.Pod{}
	for i := range list.Items {
		if idx := podIndex(c, list.Items[i].Name); idx >= 0 && idx < n {
			byIndex[idx] = &list.Items[i]
		}
	}
	now := time.Now()
	key := client.ObjectKeyFromObject(c)
	grace := c.UnreadyGracePeriod()
	health := make([]podHealth, n)
	var next time.Duration
	for i := range n {
		h := &health[i]
		pod := byIndex[i]
		if pod != nil {
			h.ready, h.unreadySince = podReadiness(pod)
			_, hasCert := pod.Annotations[apiLeaf.annotation()]
			h.plainHTTP = apiTLSEnabled(c) && !hasCert
		} else {
			h.unreadySince = r.missingSince(key, i, now)
		}
		if pod != nil {
			r.clearMissing(key, i)
		}
		if h.ready {
			continue
		}
		if left := grace - now.Sub(h.unreadySince); left > 0 {
			if next == 0 || left < next {
				next = left
			}
		} else {
			h.evacuated = true
		}
	}
	return health, next, nil
}

// podReadiness returns whether a pod is ready and, when it is not, since when.
func podReadiness(p *corev1.Pod) (bool, time.Time) {
	since := p.CreationTimestamp.Time
	if !p.DeletionTimestamp.IsZero() {
		return false, p.DeletionTimestamp.Time
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			if cond.Status == corev1.ConditionTrue {
				return true, time.Time{}
			}
			if !cond.LastTransitionTime.IsZero() {
				since = cond.LastTransitionTime.Time
			}
		}
	}
	return false, since
}

// missingSince remembers when a pod was first found missing (no Pod object carries that time).
func (r *ClusterReconciler) missingSince(cluster ktypes.NamespacedName, pod int, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.missing == nil {
		r.missing = map[ktypes.NamespacedName]map[int]time.Time{}
	}
	if r.missing[cluster] == nil {
		r.missing[cluster] = map[int]time.Time{}
	}
	if t, ok := r.missing[cluster][pod]; ok {
		return t
	}
	r.missing[cluster][pod] = now
	return now
}

func (r *ClusterReconciler) clearMissing(cluster ktypes.NamespacedName, pod int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.missing[cluster], pod)
}

// unavailable lists the pods among the first replicas that take no target in this placement: those unready past
// the grace period, and unready ones holding no target yet (a pod starting after a scale-out, or replacing an
// evacuated one: targets move onto it once it is ready, so they stay collected meanwhile). An unready pod within
// its grace period keeps the targets it has. Nothing is left out when that would leave no pod at all (there is
// then nowhere to move targets to, and they wait for whichever pod comes back).
func unavailable(health []podHealth, replicas int, previous map[string]int) []int {
	holding := map[int]bool{}
	for _, p := range previous {
		holding[p] = true
	}
	var out []int
	for i := 0; i < replicas && i < len(health); i++ {
		if health[i].evacuated || !health[i].ready && !holding[i] {
			out = append(out, i)
		}
	}
	if len(out) == min(replicas, len(health)) {
		return nil
	}
	return out
}

// podStatuses builds status.pods and counts the targets no ready, configured pod collects.
func podStatuses(c *gnmicv1alpha1.Cluster, health []podHealth, replicas int, assignments map[string]int,
	errs []error) ([]gnmicv1alpha1.CollectorPodStatus, int) {
	loads := make([]int, len(health))
	for _, p := range assignments {
		if p >= 0 && p < len(loads) {
			loads[p]++
		}
	}
	notCollected := 0
	out := make([]gnmicv1alpha1.CollectorPodStatus, 0, replicas)
	for i := range min(replicas, len(health)) {
		h := health[i]
		st := gnmicv1alpha1.CollectorPodStatus{Name: podName(c, i), Ready: h.ready, Targets: int32(loads[i])}
		switch {
		case h.ready && i < len(errs) && errs[i] != nil:
			st.State, st.Message = gnmicv1alpha1.CollectorPodApplyFailed, errs[i].Error()
			notCollected += loads[i]
		case h.ready:
			st.State = gnmicv1alpha1.CollectorPodConfigured
		case h.evacuated:
			st.State = gnmicv1alpha1.CollectorPodEvacuated
			notCollected += loads[i]
		default:
			st.State = gnmicv1alpha1.CollectorPodUnready
			notCollected += loads[i]
		}
		if !h.ready {
			// Seconds are enough, and keep the status from changing on every read.
			since := metav1.NewTime(h.unreadySince.UTC().Truncate(time.Second))
			st.UnreadySince = &since
		}
		out = append(out, st)
	}
	return out, notCollected
}
