package pipeline

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/baggage"
	"google.golang.org/grpc/metadata"
)

// TestLeaseTravelsAsMetadataNotBaggage: the lease ID is in the outgoing metadata of the call WithContext
// prepares, in no baggage member; a forwarding stage passes the incoming one on; the stored reference is a
// digest that is not the ID.
func TestLeaseTravelsAsMetadataNotBaggage(t *testing.T) {
	g := NewWithT(t)
	id := NewLeaseID()
	g.Expect(id).To(HaveLen(32))
	g.Expect(NewLeaseID()).NotTo(Equal(id))
	ctx, err := WithContext(context.Background(), Context{Namespace: "team", SourceTarget: "web", LeaseID: id})
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range baggage.FromContext(ctx).Members() {
		g.Expect(m.Value()).NotTo(ContainSubstring(id), "baggage member %s", m.Key())
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	g.Expect(md.Get(MDLease)).To(Equal([]string{id}))

	// The next stage receives it and passes it on.
	in := metadata.NewIncomingContext(baggage.ContextWithBaggage(context.Background(), baggage.FromContext(ctx)), md)
	pc := FromContext(in)
	g.Expect(pc.LeaseID).To(Equal(id))
	g.Expect(pc.Validate()).To(Succeed())
	out, _ := metadata.FromOutgoingContext(ForwardLease(in))
	g.Expect(out.Get(MDLease)).To(Equal([]string{id}))

	g.Expect(LeaseRef(id)).NotTo(ContainSubstring(id))
	g.Expect(LeaseRef(id)).To(Equal(LeaseRef(id)))
	g.Expect(LeaseRef(LeaseRef(id))).NotTo(Equal(LeaseRef(id)), "the reference does not work as the lease")
	g.Expect(LeaseRef("")).To(BeEmpty())
	g.Expect(Context{Namespace: "team", SourceTarget: "web"}.Validate()).To(MatchError(ContainSubstring("metadata " + MDLease)))
}
