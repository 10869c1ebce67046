package stage

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// An exemplar names a trace only when that trace was sampled: an unsampled trace ID leads nowhere in the backend.
func TestExemplar(t *testing.T) {
	tid := trace.TraceID{1, 2, 3}
	sid := trace.SpanID{4, 5}
	for _, tc := range []struct {
		name string
		sc   trace.SpanContext
		want prometheus.Labels
	}{
		{name: "no span"},
		{name: "unsampled span", sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})},
		{name: "sampled span", sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
			TraceFlags: trace.FlagsSampled}), want: prometheus.Labels{ExemplarTraceID: tid.String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := trace.ContextWithSpanContext(context.Background(), tc.sc)
			g.Expect(exemplar(ctx)).To(Equal(tc.want))
		})
	}
}
