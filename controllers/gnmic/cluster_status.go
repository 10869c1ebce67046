package gnmic

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/placement"
)

// The Cluster's Ready, ConfigApplied and CapacityExhausted conditions.

func (r *ClusterReconciler) setApplied(c *gnmicv1alpha1.Cluster, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: gnmicv1alpha1.ClusterConditionConfigApplied,
		Status: status, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

func (r *ClusterReconciler) setReady(c *gnmicv1alpha1.Cluster, applied bool) {
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionReady, ObservedGeneration: c.Generation}
	want := c.DesiredReplicas()
	switch {
	case applied && c.Status.ReadyReplicas >= want:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, gnmicv1alpha1.ReasonClusterReady, "every collector is ready and configured"
	case c.Status.ReadyReplicas > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonClusterPartiallyReady
		cond.Message = fmt.Sprintf("%d of %d collectors ready", c.Status.ReadyReplicas, want)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, gnmicv1alpha1.ReasonClusterNotReady, "no collector is ready"
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

func (r *ClusterReconciler) setCapacityCondition(c *gnmicv1alpha1.Cluster, placed placement.Result) {
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionCapacityExhausted, Status: metav1.ConditionFalse,
		Reason: gnmicv1alpha1.ReasonCapacityAvailable, Message: "every target is placed", ObservedGeneration: c.Generation}
	if n := len(placed.Unassigned); n > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, gnmicv1alpha1.ReasonCapacityExhausted
		cond.Message = fmt.Sprintf("%d targets fit on no pod (capacity %d per pod)", n, placed.Capacity)
		if !meta.IsStatusConditionTrue(c.Status.Conditions, cond.Type) {
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, cond.Reason, "Place", cond.Message)
		}
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// setCredentialsCondition reports, while it holds, that credentials are not pushed because the collectors' API is
// plain HTTP; a Warning event when it starts.
func (r *ClusterReconciler) setCredentialsCondition(c *gnmicv1alpha1.Cluster, withheld []string) {
	if len(withheld) == 0 {
		meta.RemoveStatusCondition(&c.Status.Conditions, gnmicv1alpha1.ClusterConditionCredentialsWithheld)
		return
	}
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionCredentialsWithheld, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonPlaintextAPI, ObservedGeneration: c.Generation,
		Message: fmt.Sprintf("the collectors' API is plain HTTP, so the credentials of TargetProfiles %s are not sent "+
			"(anything on the pod network could read them); remove spec.api.plainHTTP (the collectors then serve mutual TLS)",
			strings.Join(withheld, ", "))}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, cond.Type) {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, cond.Reason, "Push", cond.Message)
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// setCredentialsMissingCondition reports, while it holds, the TargetProfiles whose credentials Secret is missing
// (their targets are held back); a Warning event when it starts or the list changes.
func (r *ClusterReconciler) setCredentialsMissingCondition(c *gnmicv1alpha1.Cluster, missing map[ktypes.NamespacedName]string) {
	if len(missing) == 0 {
		meta.RemoveStatusCondition(&c.Status.Conditions, gnmicv1alpha1.ClusterConditionCredentialsMissing)
		return
	}
	lines := make([]string, 0, len(missing))
	for _, k := range slices.SortedFunc(maps.Keys(missing), func(a, b ktypes.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		lines = append(lines, "TargetProfile/"+k.Name+": "+missing[k])
	}
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionCredentialsMissing, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonCredentialsSecretMissing, ObservedGeneration: c.Generation,
		Message: "targets of these profiles are held back, not pushed without credentials: " + strings.Join(lines, "; ")}
	if old := meta.FindStatusCondition(c.Status.Conditions, cond.Type); old == nil || old.Message != cond.Message {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, cond.Reason, "Push", cond.Message)
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}
