package source

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTargetSpanCarriesNoCredentials: a token written into repo-url (the ConfigMap can be edited directly) reaches
// no span attribute, and no error the target records.
func TestTargetSpanCarriesNoCredentials(t *testing.T) {
	g := NewWithT(t)
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	target := Target{Namespace: "team", Name: "web", RepoURL: "https://x-access-token:ghp_SECRET@127.0.0.1:1/org/web.git", Ref: "main"}
	_, span, _ := startTarget(context.Background(), target)
	span.End()
	g.Expect(rec.Ended()).To(HaveLen(1))
	for _, a := range rec.Ended()[0].Attributes() {
		g.Expect(a.Value.String()).NotTo(ContainSubstring("ghp_SECRET"), string(a.Key))
	}
	_, err := (&Handler{GitTimeout: 1}).resolveRef(context.Background(), target, nil)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("ghp_SECRET"))
}
