package stage

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestSupersededSurvivesWrappingAndTheWire(t *testing.T) {
	g := NewWithT(t)
	err := Superseded("lease lost")
	g.Expect(IsSuperseded(err)).To(BeTrue())
	g.Expect(status.Code(err)).To(Equal(codes.Aborted))
	// A stage wraps its downstream error; the gRPC server turns it back into a status with the same details.
	wrapped := fmt.Errorf("pruning: %w", err)
	g.Expect(IsSuperseded(wrapped)).To(BeTrue())
	st, ok := status.FromError(wrapped)
	g.Expect(ok).To(BeTrue())
	g.Expect(IsSuperseded(st.Err())).To(BeTrue())

	for _, other := range []error{nil, errors.New("lease lost"), status.Error(codes.Aborted, "lease lost"),
		status.Error(codes.FailedPrecondition, "superseded")} {
		g.Expect(IsSuperseded(other)).To(BeFalse(), "%v", other)
	}
}

// A superseded stage ended its work on purpose: its span is not an error (pharos replays errors) and says why.
func TestEndMarksSupersededSpans(t *testing.T) {
	g := NewWithT(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	for _, err := range []error{Superseded("lease lost"), errors.New("boom")} {
		_, span := tp.Tracer(TracerName).Start(context.Background(), "x")
		End(span, err)
	}
	got := exp.GetSpans()
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].Status.Code).To(Equal(otelcodes.Unset))
	g.Expect(got[0].Attributes).To(ContainElement(attribute.Bool(AttrSuperseded, true)))
	g.Expect(got[1].Status.Code).To(Equal(otelcodes.Error))
}
