package gnmic

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/version"
)

// setFeaturesCondition records the collector version read from the image and whether every enabled Pipeline's
// objects can be decoded by it. What cannot is already left out of the plan; the condition says what and why.
func setFeaturesCondition(c *gnmicv1alpha1.Cluster, p *plan.Plan) {
	c.Status.CollectorVersion = ""
	if v, ok := version.FromImage(c.Spec.Image); ok {
		c.Status.CollectorVersion = v.String()
	}
	var refused []string
	for _, name := range slices.Sorted(maps.Keys(p.Pipelines)) {
		res := p.Pipelines[name]
		if !res.Enabled {
			continue
		}
		for _, why := range res.Unsupported {
			refused = append(refused, fmt.Sprintf("Pipeline %s: %s", name, why))
		}
	}
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionFeaturesSupported, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonFeaturesSupported, ObservedGeneration: c.Generation,
		Message: "the collectors decode everything the Pipelines ask for"}
	if len(refused) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonUnsupportedByCollector
		cond.Message = "left out of the push: " + strings.Join(refused, "; ")
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// defaultImage gives a Cluster that names no image the operator's default, in memory only.
func defaultImage(c *gnmicv1alpha1.Cluster, image string) {
	if c.Spec.Image == "" {
		c.Spec.Image = image
	}
}
