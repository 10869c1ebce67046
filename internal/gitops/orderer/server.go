package orderer

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// StageName names the orderer in spans and metrics.
const StageName = "orderer"

// ActionOrdered is what the orderer counts in katastroma_stage_objects_total.
const ActionOrdered = "ordered"

// Server is the stateless OrdererService. Next, when set, receives the forward-ordered output of Order.
type Server struct {
	katastromav1.UnimplementedOrdererServiceServer
	Next katastromav1.LabelerServiceClient
}

func (s *Server) order(ctx context.Context, in []*katastromav1.Manifest) ([]*katastromav1.Manifest, error) {
	if err := pipeline.CheckCount(ctx, len(in)); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	reversed := false
	switch d := pipeline.IncomingValue(ctx, pipeline.MDDirection); d {
	case "", "forward":
	case "reversed":
		reversed = true
	default:
		return nil, status.Errorf(codes.InvalidArgument, "metadata %s=%q: want forward or reversed",
			pipeline.MDDirection, d)
	}
	objs := make([]*unstructured.Unstructured, 0, len(in))
	for i, m := range in {
		u, err := pipeline.Decode(m)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "manifest %d: %v", i, err)
		}
		objs = append(objs, u)
	}
	Sort(objs, reversed)
	out := make([]*katastromav1.Manifest, 0, len(objs))
	for _, u := range objs {
		m, err := pipeline.Encode(u)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		out = append(out, m)
	}
	stage.CountObject(ctx, StageName, ActionOrdered, len(out))
	return out, nil
}

// OrderStream receives manifests until the client half-closes, then streams them back in order.
func (s *Server) OrderStream(stream grpc.BidiStreamingServer[katastromav1.Manifest, katastromav1.Manifest]) error {
	return stage.ServeStream(stream, s.order)
}

// Order receives manifests, orders them and forwards them to the labeler (when Next is set).
func (s *Server) Order(stream grpc.ClientStreamingServer[katastromav1.Manifest, katastromav1.StageSummary]) error {
	var next stage.Opener[katastromav1.Manifest]
	if s.Next != nil {
		next = s.Next.Label
	}
	return stage.ServeForward(StageName, stream, s.order, next)
}
