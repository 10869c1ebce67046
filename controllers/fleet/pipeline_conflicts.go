package fleet

import (
	"context"
	"sync"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
)

// nameConflict is the Fleet pipeline that held a Pipeline's name when its write was last refused.
type nameConflict struct {
	uid      types.UID
	name, id string
}

// nameConflicts remembers, per Pipeline, the pipeline that held its Fleet name when a write was refused, so that a
// retry costs one GetPipeline instead of CreatePipeline, GetPipelineID and GetPipeline: while that pipeline still
// exists under the name, the name is still taken (Fleet names are unique), and the one read is all the refusal
// needs to be decided again. In memory on purpose: after a restart the first retry simply pays the full three
// calls again.
type nameConflicts struct {
	mu   sync.Mutex
	byCR map[client.ObjectKey]nameConflict
}

func (c *nameConflicts) remember(key client.ObjectKey, conflict nameConflict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byCR == nil {
		c.byCR = map[client.ObjectKey]nameConflict{}
	}
	c.byCR[key] = conflict
}

func (c *nameConflicts) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byCR, key)
}

func (c *nameConflicts) of(key client.ObjectKey) (nameConflict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.byCR[key]
	return got, ok
}

// recheck reads the pipeline remembered as holding name for the Pipeline key (UID uid) with one GetPipeline. It
// returns that pipeline and its ID while it still holds the name; nil (and forgets it) when nothing is
// remembered for this CR and name, or the pipeline is gone or renamed, so the caller takes the full create-first
// path.
func (c *nameConflicts) recheck(ctx context.Context, fc *fleetclient.Client, key client.ObjectKey, uid types.UID, name string) (string, *pipelinev1.Pipeline, error) {
	held, ok := c.of(key)
	if !ok {
		return "", nil, nil
	}
	if held.uid != uid || held.name != name {
		c.forget(key)
		return "", nil, nil
	}
	existing, err := fc.GetPipeline(ctx, held.id)
	switch {
	case fleetclient.IsNotFound(err):
		c.forget(key)
		return "", nil, nil
	case err != nil:
		return "", nil, err
	case existing.GetName() != name:
		c.forget(key)
		return "", nil, nil
	}
	return held.id, existing, nil
}
