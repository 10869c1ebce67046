package labeler

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// StageName names the labeler in spans and metrics.
const StageName = "labeler"

// ActionLabeled is what the labeler counts in katastroma_stage_objects_total.
const ActionLabeled = "labeled"

// Server is the stateless LabelerService. Next, when set, receives the labeled output of Label.
type Server struct {
	katastromav1.UnimplementedLabelerServiceServer
	Next katastromav1.ProvisionerServiceClient
}

func label(pc pipeline.Context, m *katastromav1.Manifest) (*katastromav1.Manifest, error) {
	u, err := pipeline.Decode(m)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := Label(u, pc); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return pipeline.Encode(u)
}

var errNoTenant = status.Error(codes.FailedPrecondition, "baggage lacks the tenant, namespace or source target")

func tenantContext(stream grpc.ServerStream) (pipeline.Context, error) {
	pc := pipeline.FromContext(stream.Context())
	if pc.Tenant == "" || pc.Namespace == "" || pc.SourceTarget == "" {
		return pc, errNoTenant
	}
	return pc, nil
}

// LabelStream labels each manifest as it arrives.
func (s *Server) LabelStream(stream grpc.BidiStreamingServer[katastromav1.Manifest, katastromav1.Manifest]) error {
	ctx := stream.Context()
	pc, err := tenantContext(stream)
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out, err := label(pc, m)
		if err != nil {
			return err
		}
		stage.CountObject(ctx, StageName, ActionLabeled, 1)
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

// labelAll labels a whole input set after checking it is complete.
func labelAll(ctx context.Context, in []*katastromav1.Manifest) ([]*katastromav1.Manifest, error) {
	pc := pipeline.FromContext(ctx)
	if pc.Tenant == "" || pc.Namespace == "" || pc.SourceTarget == "" {
		return nil, errNoTenant
	}
	if err := pipeline.CheckCount(ctx, len(in)); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	out := make([]*katastromav1.Manifest, 0, len(in))
	for _, m := range in {
		l, err := label(pc, m)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	stage.CountObject(ctx, StageName, ActionLabeled, len(out))
	return out, nil
}

// Label labels every manifest and forwards them to the provisioner (when Next is set).
func (s *Server) Label(stream grpc.ClientStreamingServer[katastromav1.Manifest, katastromav1.StageSummary]) error {
	var next stage.Opener[katastromav1.Manifest]
	if s.Next != nil {
		next = s.Next.Provision
	}
	return stage.ServeForward(StageName, stream, labelAll, next)
}
