package gnmic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/placement"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

// errRollingToTLS is a ready pod's state while it still serves plain HTTP and the Cluster's API is TLS.
var errRollingToTLS = errors.New("serves plain HTTP until the StatefulSet's roll restarts it with mutual TLS; " +
	"it keeps its last plan and is sent nothing meanwhile (a plan may carry device credentials)")

// push sends every ready pod its plan and returns each pod's error (nil for pods that are not ready: they are
// skipped, and sent their plan again once ready). When targets move, first each pod gets only the targets it
// keeps (so no target runs on two pods at once) and pods beyond the new size nothing; then every pod its full
// plan, less the targets whose old pod could not let go of them (their move waits for the next attempt). Pods
// whose payload equals the last one applied are skipped.
func (r *ClusterReconciler) push(ctx context.Context, c *gnmicv1alpha1.Cluster, p *plan.Plan, placed placement.Result,
	previous map[string]int, pods int, urls map[int]string, health []podHealth) []error {
	replicas := int(c.DesiredReplicas())
	key := client.ObjectKeyFromObject(c)
	full := make([][]string, pods)
	keep := make([][]string, pods)
	moving := false
	for t, i := range placed.Assignments {
		full[i] = append(full[i], t)
		if prev, ok := previous[t]; ok && prev != i {
			moving = true
		} else {
			keep[i] = append(keep[i], t)
		}
	}
	for t, prev := range previous {
		if _, still := placed.Assignments[t]; !still && prev < pods {
			moving = true // removed or unassigned targets leave their pod in the first phase too
		}
	}
	errs := make([]error, pods)
	send := func(plans [][]string) {
		var wg sync.WaitGroup
		for i := range pods {
			if !health[i].ready {
				// Whatever the pod holds when it is back is unknown: it gets its plan again then.
				r.Invalidate(key, i)
				continue
			}
			if errs[i] != nil {
				continue
			}
			if health[i].plainHTTP {
				// A plan may carry device credentials, which never cross the pod network in clear. The pod
				// keeps the plan it has (its targets stay collected) until it restarts with TLS, and is
				// sent its plan then.
				r.Invalidate(key, i)
				errs[i] = fmt.Errorf("pod %s: %w", podName(c, i), errRollingToTLS)
				continue
			}
			var req *plan.ApplyRequest
			if i < replicas {
				req = p.ForPod(plans[i])
			} else {
				req = plan.Empty()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.applyToPod(ctx, c, i, urls[i], req, plans[i]); err != nil {
					errs[i] = fmt.Errorf("pod %s: %w", podName(c, i), err)
				}
			}()
		}
		wg.Wait()
	}
	if moving {
		send(keep)
		// A target whose old (ready) pod failed to drop it stays off its new pod for now.
		for i := range full {
			full[i] = slices.DeleteFunc(full[i], func(t string) bool {
				prev, ok := previous[t]
				return ok && prev != i && prev < pods && health[prev].ready && errs[prev] != nil
			})
		}
	}
	send(full)
	return errs
}

// applyToPod posts one pod's plan unless the same payload was applied last; targets are the names it holds, told
// to the monitor so that a poll finding the pod holding something else re-pushes it.
func (r *ClusterReconciler) applyToPod(ctx context.Context, c *gnmicv1alpha1.Cluster, pod int, url string,
	req *plan.ApplyRequest, targets []string) error {
	body, hash, err := plan.Encode(req)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(c)
	r.mu.Lock()
	same := r.applied[key][pod] == hash
	r.mu.Unlock()
	if same {
		return nil
	}
	if pod < int(c.DesiredReplicas()) {
		defer func() {
			if err == nil {
				r.Monitor.Expect(key, pod, targets)
			}
		}()
	}
	applyCtx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	err = r.Collectors.Apply(applyCtx, url, body)
	applyTotal.WithLabelValues(c.Namespace, c.Name, result(err)).Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied == nil {
		r.applied = map[ktypes.NamespacedName]map[int]string{}
	}
	if r.applied[key] == nil {
		r.applied[key] = map[int]string{}
	}
	if err != nil {
		delete(r.applied[key], pod)
		return err
	}
	r.applied[key][pod] = hash
	return nil
}
