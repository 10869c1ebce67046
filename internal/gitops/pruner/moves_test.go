package pruner

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

func TestPendingSiblings(t *testing.T) {
	target := func(name, event, lease, deployed string) corev1.ConfigMap {
		cm := corev1.ConfigMap{}
		cm.Namespace, cm.Name = "team", name
		cm.Annotations = map[string]string{pipeline.AnnotationEventID: event, pipeline.AnnotationLeaseID: lease,
			pipeline.AnnotationDeployed: deployed}
		return cm
	}
	pc := pipeline.Context{Namespace: "team", SourceTarget: "a", EventID: "ev1", Commit: "c2"}
	for _, tc := range []struct {
		name    string
		targets []corev1.ConfigMap
		want    []string
	}{
		{name: "alone", targets: []corev1.ConfigMap{target("a", "ev1", "l1", "c1")}},
		{name: "a sibling still applying", targets: []corev1.ConfigMap{target("a", "ev1", "l1", "c1"),
			target("b", "ev1", "l2", "c1")}, want: []string{"team/b"}},
		{name: "a sibling that recorded the commit", targets: []corev1.ConfigMap{target("b", "ev1", "l2", "c2")}},
		{name: "a sibling that finished or failed", targets: []corev1.ConfigMap{target("b", "ev1", "", "c1")}},
		{name: "a target of another event", targets: []corev1.ConfigMap{target("c", "ev0", "l3", "c1")}},
		{name: "a sibling a newer event took over", targets: []corev1.ConfigMap{target("b", "ev9", "l9", "c1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(pendingSiblings(tc.targets, pc)).To(Equal(tc.want))
		})
	}
}
