package renderer

import (
	"bytes"
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// StageName names the renderer in spans and metrics.
const StageName = "renderer"

// Server is the stateless RendererService. Next, when set, receives the rendered output of Render.
type Server struct {
	katastromav1.UnimplementedRendererServiceServer
	Next   katastromav1.OrdererServiceClient
	Limits Limits
}

func (s *Server) render(ctx context.Context, chunks []*katastromav1.Chunk) ([]*katastromav1.Manifest, error) {
	if err := pipeline.CheckCount(ctx, len(chunks)); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	var buf bytes.Buffer
	for _, c := range chunks {
		buf.Write(c.GetData())
	}
	lim := s.Limits
	if lim.MaxBytes == 0 {
		lim = DefaultLimits
	}
	files, err := Untar(&buf, lim)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	pc := pipeline.FromContext(ctx)
	objs, t, err := Render(files, Input{ReleaseName: pc.SourceTarget, Namespace: pc.Namespace,
		Overrides: []byte(pipeline.IncomingValue(ctx, pipeline.MDOverrides))})
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("renderer.type", string(t)),
		attribute.Int("renderer.files", len(files)), attribute.Int("renderer.objects", len(objs)))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := make([]*katastromav1.Manifest, 0, len(objs))
	for _, u := range objs {
		m, err := pipeline.Encode(u)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		out = append(out, m)
	}
	stage.CountObject(StageName, "rendered", len(out))
	return out, nil
}

// RenderStream receives the tar chunks until the client half-closes and streams the manifests back.
func (s *Server) RenderStream(stream grpc.BidiStreamingServer[katastromav1.Chunk, katastromav1.Manifest]) error {
	return stage.ServeStream(StageName, stream, s.render)
}

// Render receives the tar chunks, renders and forwards the manifests to the orderer (when Next is set).
func (s *Server) Render(stream grpc.ClientStreamingServer[katastromav1.Chunk, katastromav1.StageSummary]) error {
	var next stage.Opener[katastromav1.Manifest]
	if s.Next != nil {
		next = s.Next.Order
	}
	return stage.ServeForward(StageName, stream, s.render, next)
}
