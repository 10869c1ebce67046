package source

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

func TestDeletionStep(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	deleting := metav1.NewTime(now.Add(-time.Minute))
	target := func(mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web",
			Annotations: map[string]string{pipeline.AnnotationDeployed: "abc"}, Finalizers: []string{FinalizerPrune}}}
		if mutate != nil {
			mutate(cm)
		}
		return cm
	}
	beingDeleted := func(cm *corev1.ConfigMap) { cm.DeletionTimestamp = &deleting }
	for name, tc := range map[string]struct {
		cm                    *corev1.ConfigMap
		inventory, nsGoing    bool
		leaseActive, recently bool
		successor             bool
		want                  deletionStep
	}{
		"live target with the finalizer":       {cm: target(nil), inventory: true, want: stepNone},
		"live target without the finalizer":    {cm: target(func(cm *corev1.ConfigMap) { cm.Finalizers = nil }), want: stepNone},
		"live target, lease active":            {cm: target(func(cm *corev1.ConfigMap) { cm.Finalizers = nil }), leaseActive: true, want: stepNone},
		"deleted, something deployed":          {cm: target(beingDeleted), inventory: true, want: stepPrune},
		"deleted, lease active":                {cm: target(beingDeleted), inventory: true, leaseActive: true, want: stepNone},
		"deleted, pruned a moment ago":         {cm: target(beingDeleted), inventory: true, recently: true, want: stepNone},
		"deleted, nothing left":                {cm: target(beingDeleted), want: stepRelease},
		"deleted, namespace terminating":       {cm: target(beingDeleted), inventory: true, nsGoing: true, want: stepRelease},
		"deleted without our finalizer":        {cm: target(func(cm *corev1.ConfigMap) { beingDeleted(cm); cm.Finalizers = []string{"other/x"} }), inventory: true, want: stepNone},
		"deleted, opted out":                   {cm: target(func(cm *corev1.ConfigMap) { beingDeleted(cm); cm.Annotations[AnnotationOrphanOnDelete] = "true" }), inventory: true, want: stepRelease},
		"deleted, opt-out annotation not true": {cm: target(func(cm *corev1.ConfigMap) { beingDeleted(cm); cm.Annotations[AnnotationOrphanOnDelete] = "yes" }), inventory: true, want: stepPrune},
		"deleted, renamed: a successor adopts": {cm: target(beingDeleted), inventory: true, successor: true, want: stepRelease},
	} {
		t.Run(name, func(t *testing.T) {
			got := deletionStepFor(tc.cm, targetState{inventory: tc.inventory, namespaceTerminating: tc.nsGoing,
				leaseActive: tc.leaseActive, triedRecently: tc.recently, successor: tc.successor})
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

// The lease write puts the finalizer on a target that deploys; never on one being deleted (the API server
// refuses new finalizers there).
func TestSetLeaseAddsTheFinalizer(t *testing.T) {
	g := NewWithT(t)
	cm := &corev1.ConfigMap{}
	setLease(cm, "abc", time.Now())
	g.Expect(cm.Finalizers).To(ConsistOf(FinalizerPrune))
	setLease(cm, "def", time.Now())
	g.Expect(cm.Finalizers).To(ConsistOf(FinalizerPrune))
	now := metav1.Now()
	deleted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	setLease(deleted, "abc", time.Now())
	g.Expect(deleted.Finalizers).To(BeEmpty())
}
