package fleet_test

import (
	"context"
	"testing"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// thisCluster is the cluster identity the manager writes into ownership markers (--fleet-cluster-id is not set in
// the suite, so the kube-system namespace's UID).
func thisCluster(g Gomega) string {
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: metav1.NamespaceSystem}, ns)).To(Succeed())
	return string(ns.UID)
}

// callsAbout are the ordinary (reconcile) requests the server received since `since` that concern the Fleet
// pipeline name or ID given, in the order they arrived.
func callsAbout(since time.Time, name, id string) []fleetserver.Call {
	var out []fleetserver.Call
	for _, c := range srv.Calls() {
		if c.Caller != "" || c.At.Before(since) {
			continue
		}
		var about bool
		switch r := c.Request.(type) {
		case *pipelinev1.CreatePipelineRequest:
			about = r.GetPipeline().GetName() == name
		case *pipelinev1.UpdatePipelineRequest:
			about = r.GetPipeline().GetName() == name || r.GetPipeline().GetId() == id
		case *pipelinev1.UpsertPipelineRequest:
			about = r.GetPipeline().GetName() == name
		case *pipelinev1.GetPipelineIDRequest:
			about = r.GetName() == name
		case *pipelinev1.GetPipelineRequest:
			about = r.GetId() == id
		case *pipelinev1.DeletePipelineRequest:
			about = r.GetId() == id
		}
		if about {
			out = append(out, c)
		}
	}
	return out
}

func methods(calls []fleetserver.Call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.Method)
	}
	return out
}

// A pipeline that carries this cluster's marker for a CR that no longer exists (a leftover) holds the name: the
// Pipeline that wants it is refused. Its retries back off (the suite's first wait is 1 s, then as long again as it
// has been refused) and each costs one request, a GetPipeline of the holder, counted at the server; once the
// holder is gone the next retry creates the pipeline.
func TestSelfCausedNameTakenBacksOffWithOneCallPerRetry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	name := ns + "-leftover"
	leftover := srv.PutPipeline(&pipelinev1.Pipeline{Name: name, Contents: `left { over = true }`, Enabled: proto.Bool(true),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
		Metadata:   pipelines.Marker{Cluster: thisCluster(g), Namespace: ns, Name: "deleted-long-ago", UID: "0ldc0de"}.Struct()})
	id := leftover.GetId()

	start := time.Now()
	p := newPipeline(ns, "wants-the-name", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = name })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	refusedWith(g, key, fleetv1alpha1.ReasonOwnedElsewhere, id, ns+"/deleted-long-ago")

	// The first attempt pays create, name lookup and read; then four retries of one read each.
	var calls []fleetserver.Call
	g.Eventually(func(g Gomega) {
		calls = callsAbout(start, name, id)
		g.Expect(len(calls)).To(BeNumerically(">=", 3+4), "calls so far: %v", methods(calls))
	}, 45*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(methods(calls[:3])).To(Equal([]string{"CreatePipeline", "GetPipelineID", "GetPipeline"}))
	for i, c := range calls[3:] {
		g.Expect(c.Method).To(Equal("GetPipeline"), "retry %d costs one read, calls: %v", i+1, methods(calls))
	}
	// Retry i+1 comes at least as long after retry i as retry i came after the first refusal (less a margin for
	// the time the first attempt took): the waits double instead of repeating every second.
	t0 := calls[0].At
	defer func() { t.Logf("calls after the first one at: %v", sinceEach(t0, calls)) }()
	retries := calls[2:] // the first attempt's last call, then one call per retry
	for i := 1; i+1 < len(retries); i++ {
		prev, next := retries[i].At.Sub(t0), retries[i+1].At.Sub(t0)
		g.Expect(next).To(BeNumerically(">=", prev*3/2), "retry times after the first call: %v", sinceEach(t0, retries))
	}
	g.Expect(writesTo(id)).To(BeEmpty(), "the holder is never written")

	// The leftover is cleaned up: the next retry's one read finds it gone, and the Pipeline creates its own.
	srv.RemovePipeline(id)
	g.Eventually(func(g Gomega) {
		got := synced(g, key)
		g.Expect(got.Status.ID).NotTo(BeEmpty())
		g.Expect(got.Status.ID).NotTo(Equal(id))
	}, 45*time.Second).Should(Succeed())
	g.Expect(srv.PipelineByName(name).GetContents()).To(Equal(p.Spec.Contents))
}

func sinceEach(t0 time.Time, calls []fleetserver.Call) []time.Duration {
	out := make([]time.Duration, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.At.Sub(t0).Round(10*time.Millisecond))
	}
	return out
}
