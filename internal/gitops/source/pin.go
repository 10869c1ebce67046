package source

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// AnnotationServedBy names, on a source target, the Platform (`<namespace>/<name>`) whose source handler serves it.
// A cluster may run two Platforms, and a repository's webhook, a Retrieve or a pharos replay reaches whichever one
// it was sent to; without the pin both would deploy the target (twice, or the older commit after the newer one).
// The first lease a Platform's source handler takes on an unpinned target writes it, in the same update as the
// lease (so two Platforms racing for one target conflict and exactly one wins); the registration API writes it
// when it creates a target. Every other Platform's source handler then leaves the target alone: its webhook
// ignores it, Retrieve and Replay refuse it, its polls and deletion passes skip it. The Platform controller clears
// the pins naming a Platform that is being deleted, so another Platform can take the targets over.
const AnnotationServedBy = pipeline.AnnotationServedBy

// NotServed is a source target pinned to another Platform (AnnotationServedBy): this source handler does not serve
// it. Retrieve and Replay answer FailedPrecondition; the webhook leaves the target out and says why.
type NotServed struct {
	Namespace, Name string
	// ServedBy is the Platform the target is pinned to; Platform the one of this source handler ("" when the
	// handler runs outside a Platform, e.g. all-in-one).
	ServedBy, Platform string
}

func (e *NotServed) Error() string {
	self := "Platform " + e.Platform
	if e.Platform == "" {
		self = "this source handler (which belongs to no Platform)"
	}
	return fmt.Sprintf("source target %s/%s is served by Platform %s (annotation %s), not by %s",
		e.Namespace, e.Name, e.ServedBy, AnnotationServedBy, self)
}

// servedHere returns a *NotServed when cm is pinned to a Platform other than platform. An unpinned target is
// served by any source handler; a handler of a Platform pins it with its first lease (pin).
func servedHere(cm *corev1.ConfigMap, platform string) error {
	by := cm.Annotations[AnnotationServedBy]
	if by == "" || by == platform {
		return nil
	}
	return &NotServed{Namespace: cm.Namespace, Name: cm.Name, ServedBy: by, Platform: platform}
}

// pin records platform on an unpinned cm (nothing when the handler belongs to no Platform: a development pipeline
// must not pin targets a Platform should serve later).
func pin(cm *corev1.ConfigMap, platform string) {
	if platform == "" || cm.Annotations[AnnotationServedBy] != "" {
		return
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotationServedBy] = platform
}
