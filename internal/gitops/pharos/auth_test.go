package pharos

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// platformTokens stands in for the API server's TokenReview: a stage token of the Platform in namespace plat (the
// collector runs as katastroma-otel-collector there), one of the Platform in namespace other, and a tenant's.
func platformTokens(_ context.Context, token string) (string, error) {
	users := map[string]string{
		"collector":   "system:serviceaccount:plat:katastroma-otel-collector",
		"other-stage": "system:serviceaccount:other:katastroma-source",
		"tenant":      "system:serviceaccount:plat:default",
	}
	if u, ok := users[token]; ok {
		return u, nil
	}
	return "", errors.New("the token is not valid")
}

// TestSpansNeedAPlatformStageToken: with authentication on, both OTLP ports take spans only with a stage token
// of pharos's own Platform (the collector's); none, a forged one, another Platform's stage and a non-stage
// identity of the namespace are refused before pharos reads a span, so a refused failure starts no replay. The
// kubelet's probe needs no token.
func TestSpansNeedAPlatformStageToken(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	o := testOptions(src.addr)
	o.Auth = &stage.Authenticator{Review: platformTokens, Namespaces: []string{"plat"}}
	p, _ := startPharos(t, o)
	ctx := context.Background()

	conn, err := grpc.NewClient(p.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	exportGRPC := func(token string) grpccodes.Code {
		cctx := ctx
		if token != "" {
			cctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		_, err := collectortrace.NewTraceServiceClient(conn).Export(cctx, &collectortrace.ExportTraceServiceRequest{})
		return status.Code(err)
	}
	exportHTTP := func(method, path, token string) int {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+p.HTTPAddr()+path, bytes.NewReader(nil))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/x-protobuf")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for token, want := range map[string]struct {
		grpc grpccodes.Code
		http int
	}{
		"":            {grpccodes.Unauthenticated, http.StatusUnauthorized},
		"forged":      {grpccodes.Unauthenticated, http.StatusUnauthorized},
		"other-stage": {grpccodes.PermissionDenied, http.StatusForbidden},
		"tenant":      {grpccodes.PermissionDenied, http.StatusForbidden},
		"collector":   {grpccodes.OK, http.StatusOK},
	} {
		g.Expect(exportGRPC(token)).To(Equal(want.grpc), "OTLP/gRPC with token %q", token)
		g.Expect(exportHTTP(http.MethodPost, "/v1/traces", token)).To(Equal(want.http), "OTLP/HTTP with token %q", token)
	}
	g.Expect(exportHTTP(http.MethodGet, healthPath, "")).To(Equal(http.StatusOK), "the probe")

	// A failed event exported without a token is never seen; the same with the collector's token is replayed.
	refused, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(p.HTTPAddr()), otlptracehttp.WithInsecure())
	g.Expect(err).NotTo(HaveOccurred())
	refusedID := failingEvent(tracerTo(t, refused, src.addr))
	admitted, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(p.GRPCAddr()), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithHeaders(map[string]string{"authorization": "Bearer collector"}))
	g.Expect(err).NotTo(HaveOccurred())
	tr := tracerTo(t, admitted, src.addr)
	src.setTracer(tr)
	admittedID := failingEvent(tr)
	g.Eventually(src.Calls).Should(Equal([]string{admittedID}))
	g.Consistently(func() []string {
		var ids []string
		for _, e := range p.Events() {
			ids = append(ids, e.ID)
		}
		return ids
	}, 300*time.Millisecond).ShouldNot(ContainElement(refusedID))
}
