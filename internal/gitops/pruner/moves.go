package pruner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// An object moved from target A to target B in one push is in A's prune set and B's desired set. The targets of a
// push run concurrently: if A pruned before B applied, A would delete the object (a moved PVC would come back
// empty). So a pruner waits, before deleting, until every other target of its event has applied: once B applied,
// the object carries B's label and A's pruner skips it.

// DefaultSiblingWait bounds how long a pruner waits for the other targets of its push (the call's deadline may end
// it sooner).
const DefaultSiblingWait = 2 * time.Minute

// siblingPoll is the pause between two looks at the other targets.
const siblingPoll = 200 * time.Millisecond

// pendingSiblings names the other source targets of the event that have not applied its commit yet: those
// recording this event (event-id), still holding a lease (not finished or failed), whose deployed commit is not
// the event's. A target a newer event took over records that event instead and is not waited for.
func pendingSiblings(targets []corev1.ConfigMap, pc pipeline.Context) []string {
	var out []string
	for _, cm := range targets {
		a := cm.Annotations
		if cm.Name == pc.SourceTarget || a[pipeline.AnnotationEventID] != pc.EventID {
			continue
		}
		if a[pipeline.AnnotationLeaseID] != "" && a[pipeline.AnnotationDeployed] != pc.Commit {
			out = append(out, cm.Namespace+"/"+cm.Name)
		}
	}
	sort.Strings(out)
	return out
}

// waitForSiblings waits until every other target of the event applied (pendingSiblings is empty), within
// s.SiblingWait and the call's deadline. A sibling still pending then fails the prune: nothing is deleted and the
// event fails (to be replayed), rather than deleting what a sibling may be about to take over.
func (s *Server) waitForSiblings(ctx context.Context, pc pipeline.Context) error {
	if pc.EventID == "" || pc.Offboard {
		return nil
	}
	limit := s.SiblingWait
	if limit == 0 {
		limit = DefaultSiblingWait
	}
	var pending []string
	err := wait.PollUntilContextTimeout(ctx, siblingPoll, limit, true, func(ctx context.Context) (bool, error) {
		var l corev1.ConfigMapList
		if err := s.Clients.Platform.List(ctx, &l, client.InNamespace(pc.Namespace),
			client.MatchingLabels{pipeline.LabelType: pipeline.TypeSourceTarget}); err != nil {
			return false, err
		}
		pending = pendingSiblings(l.Items, pc)
		return len(pending) == 0, nil
	})
	if err == nil {
		return nil
	}
	if len(pending) == 0 {
		return status.Error(codes.Unavailable, fmt.Sprintf("reading the other targets of the push: %v", err))
	}
	return status.Errorf(codes.Aborted, "not pruning: the other targets of this push (%s) did not apply within %s; "+
		"an object moving to one of them would be deleted", strings.Join(pending, ", "), limit)
}
