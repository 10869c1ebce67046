package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// TestTenantReadablePlacesHoldNoUsableLease: while an event holds its source target's lease, what a tenant can
// read — the source target ConfigMap in its own namespace, and the trace of the event — gives no value that lets
// a caller act as the holder. A provisioner call with the lease annotation's value is refused and writes
// nothing; the lease the processor really holds appears in no span and no object.
func TestTenantReadablePlacesHoldNoUsableLease(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	entered, release := holdNext(ns)
	defer hookFunc.Store(nil)

	sha, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "v")})
	event := accepted(t, ns, r.pushPayload(sha, changed))
	var held string
	Eventually(entered).Should(Receive(&held))
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	// The tenant reads its source target: the lease annotation says a lease is held, and by which reference.
	ref := mustCM(ctx, ns, "web").Annotations[pipeline.AnnotationLeaseID]
	Expect(ref).NotTo(BeEmpty(), "the held event's lease is on the source target")

	conn, err := stage.Dial(pipe.Stages[runner.Provisioner].GRPCAddr)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	pctx, err := pipeline.WithContext(ctx, pipeline.Context{Tenant: "t", Namespace: ns, SourceTarget: "web",
		Commit: sha, LeaseID: ref})
	Expect(err).NotTo(HaveOccurred())
	m, err := pipeline.Encode(mustUnstructured(configMapYAML("stolen", "", "x")))
	Expect(err).NotTo(HaveOccurred())
	_, err = stage.Forward(pctx, katastromav1.NewProvisionerServiceClient(conn).Provision, []*katastromav1.Manifest{m})
	Expect(status.Code(err)).To(Equal(grpccodes.Aborted),
		"the lease annotation a tenant reads must not work as the lease: %v", err)
	_, err = getCM(ctx, ns, "stolen")
	Expect(err).To(HaveOccurred(), "a caller holding only the annotation's value wrote an object")

	close(release)
	released = true
	Expect(waitEvent(t, event).Status.Code).NotTo(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "a").Data).To(HaveKeyWithValue("value", "v"))

	// Nothing exported or stored carries the lease the processor held.
	for _, s := range traceSpans(event) {
		Expect(s.SpanContext.SpanID().String()).NotTo(Equal(held), "span %s's ID is the lease", s.Name)
		for _, a := range s.Attributes {
			Expect(a.Value.String()).NotTo(ContainSubstring(held), "span %s attribute %s holds the lease", s.Name, a.Key)
		}
	}
	for _, name := range []string{"web", "a"} {
		for k, v := range mustCM(ctx, ns, name).Annotations {
			Expect(v).NotTo(ContainSubstring(held), "ConfigMap %s annotation %s holds the lease", name, k)
		}
	}
}
