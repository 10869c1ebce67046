package renderer

import (
	"bytes"
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/log"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// StageName names the renderer in spans and metrics.
const StageName = "renderer"

// ActionSkipped is the action of a skipped Helm hook in the renderer's StageSummary results.
const ActionSkipped = "skipped"

// ActionRendered counts the objects a render produced.
const ActionRendered = "rendered"

// HookSkippedEvent is the span event recorded for each Helm hook the renderer skipped.
const HookSkippedEvent = "helm.hook.skipped"

// Server is the stateless RendererService. Next, when set, receives the rendered output of Render.
type Server struct {
	katastromav1.UnimplementedRendererServiceServer
	Next   katastromav1.OrdererServiceClient
	Limits Limits
	// RenderTimeout bounds one render (0: DefaultRenderTimeout); MaxOutputBytes bounds its output (0:
	// DefaultMaxOutputBytes). Exceeding either fails that source target's event, ResourceExhausted.
	RenderTimeout  time.Duration
	MaxOutputBytes int
}

// targetPath is the source target's directory relative to the shipped files (MDTargetPath), refusing escapes.
func targetPath(ctx context.Context) (string, error) {
	p := pipeline.IncomingValue(ctx, pipeline.MDTargetPath)
	if p == "" {
		return "", nil
	}
	c := path.Clean(p)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", status.Errorf(codes.InvalidArgument, "metadata %s=%q leaves the shipped files", pipeline.MDTargetPath, p)
	}
	return c, nil
}

func (s *Server) render(ctx context.Context, chunks []*katastromav1.Chunk) ([]*katastromav1.Manifest, []Hook, error) {
	if err := pipeline.CheckCount(ctx, len(chunks)); err != nil {
		return nil, nil, status.Error(codes.DataLoss, err.Error())
	}
	var buf bytes.Buffer
	for _, c := range chunks {
		buf.Write(c.GetData())
	}
	lim := s.Limits
	if lim.MaxBytes == 0 {
		lim = DefaultLimits
	}
	pc := pipeline.FromContext(ctx)
	dir, err := targetPath(ctx)
	if err != nil {
		return nil, nil, err
	}
	files, err := Untar(&buf, lim)
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "source target %s/%s (path %q): %v", pc.Namespace,
			pc.SourceTarget, pc.Path, err)
	}
	res, err := s.renderBounded(ctx, pc, files, Input{ReleaseName: pc.SourceTarget, Namespace: pc.Namespace,
		Overrides: []byte(pipeline.IncomingValue(ctx, pipeline.MDOverrides)), Path: dir,
		HelmHooks: pipeline.IncomingValue(ctx, pipeline.MDHelmHooks)})
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("renderer.type", string(res.Type)),
		attribute.Int("renderer.files", len(files)), attribute.Int("renderer.objects", len(res.Objects)),
		attribute.String("renderer.target_path", dir), attribute.Int("renderer.hooks_skipped", len(res.SkippedHooks)))
	if st, coded := status.FromError(err); err != nil && coded && st.Code() != codes.Unknown {
		return nil, nil, err // a bound or the caller's cancellation, already worded
	}
	if errors.Is(err, ErrOutputTooLarge) {
		return nil, nil, status.Errorf(codes.ResourceExhausted, "source target %s/%s: %v", pc.Namespace, pc.SourceTarget, err)
	}
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, h := range res.SkippedHooks {
		span.AddEvent(HookSkippedEvent, trace.WithAttributes(attribute.String("object.kind", h.Kind),
			attribute.String("object.name", h.Name), attribute.String("helm.hook", strings.Join(h.Events, ",")),
			attribute.String("helm.template", h.Path)))
		log.FromContext(ctx).Info("skipped a Helm hook: hooks are not applied", "namespace", pc.Namespace,
			"sourceTarget", pc.SourceTarget, "commit", pc.Commit, "kind", h.Kind, "name", h.Name,
			"hook", strings.Join(h.Events, ","), "template", h.Path)
	}
	if len(res.SkippedHooks) > 0 {
		stage.CountObject(ctx, StageName, ActionSkipped, len(res.SkippedHooks))
	}
	out := make([]*katastromav1.Manifest, 0, len(res.Objects))
	for _, u := range res.Objects {
		m, err := pipeline.Encode(u)
		if err != nil {
			return nil, nil, status.Error(codes.Internal, err.Error())
		}
		out = append(out, m)
	}
	stage.CountObject(ctx, StageName, ActionRendered, len(out))
	return out, res.SkippedHooks, nil
}

// RenderStream receives the tar chunks until the client half-closes and streams the manifests back.
func (s *Server) RenderStream(stream grpc.BidiStreamingServer[katastromav1.Chunk, katastromav1.Manifest]) error {
	return stage.ServeStream(stream, func(ctx context.Context, in []*katastromav1.Chunk) ([]*katastromav1.Manifest, error) {
		out, _, err := s.render(ctx, in)
		return out, err
	})
}

// Render receives the tar chunks, renders and forwards the manifests to the orderer (when Next is set). Its
// summary lists every skipped Helm hook as a result with action skipped and the reason as its error text, so the
// source handler can record them on the source target.
func (s *Server) Render(stream grpc.ClientStreamingServer[katastromav1.Chunk, katastromav1.StageSummary]) error {
	var next stage.Opener[katastromav1.Manifest]
	if s.Next != nil {
		next = s.Next.Order
	}
	ws := &hookReporting{ClientStreamingServer: stream}
	return stage.ServeForward(StageName, ws, func(ctx context.Context, in []*katastromav1.Chunk) ([]*katastromav1.Manifest, error) {
		out, hooks, err := s.render(ctx, in)
		ws.set(hooks)
		return out, err
	}, next)
}

// hookReporting adds the skipped hooks to the summary the shared forwarding helper sends.
type hookReporting struct {
	grpc.ClientStreamingServer[katastromav1.Chunk, katastromav1.StageSummary]
	mu    sync.Mutex
	hooks []Hook
}

func (w *hookReporting) set(h []Hook) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = h
}

// SendAndClose adds a skipped result per hook to the summary.
func (w *hookReporting) SendAndClose(sum *katastromav1.StageSummary) error {
	w.mu.Lock()
	for _, h := range w.hooks {
		sum.Results = append(sum.Results, &katastromav1.ObjectResult{
			Object: &katastromav1.ObjectRef{Kind: h.Kind, Name: h.Name},
			Action: ActionSkipped, Error: "Helm hook " + h.String() + " in " + h.Path + " is not applied"})
	}
	w.mu.Unlock()
	return w.ClientStreamingServer.SendAndClose(sum)
}
