package fleetserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"connectrpc.com/connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1/pipelinev1connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type pipelineService struct {
	pipelinev1connect.UnimplementedPipelineServiceHandler
	s *Server
}

var _ pipelinev1connect.PipelineServiceHandler = (*pipelineService)(nil)

func timestamp(t time.Time) *timestamppb.Timestamp {
	return timestamppb.New(t.UTC().Truncate(time.Microsecond))
}

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func notFound(format string, args ...any) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf(format, args...))
}

// byName finds a stored pipeline; call with mu held.
func (s *Server) byName(name string) *pipelinev1.Pipeline {
	for _, p := range s.pipelines {
		if p.GetName() == name {
			return p
		}
	}
	return nil
}

func validatePipeline(p *pipelinev1.Pipeline) error {
	switch {
	case p == nil:
		return invalid("pipeline is required")
	case p.GetName() == "":
		return invalid("pipeline.name is required")
	case p.GetContents() == "":
		return invalid("pipeline.contents is required")
	}
	return nil
}

// write stores p under name semantics: a new pipeline gets the next ID and createdAt; an existing one keeps both,
// gets updatedAt bumped and every other field replaced by what was sent. validateOnly computes the same answer
// without storing it. Call with mu held.
func (s *Server) write(p *pipelinev1.Pipeline, existing *pipelinev1.Pipeline, validateOnly bool) *pipelinev1.Pipeline {
	out := proto.Clone(p).(*pipelinev1.Pipeline)
	now := timestamp(s.now())
	if existing != nil {
		out.Id = proto.String(existing.GetId())
		out.CreatedAt = existing.GetCreatedAt()
	} else {
		out.CreatedAt = now
		if !validateOnly {
			out.Id = proto.String(strconv.Itoa(s.nextID))
			s.nextID++
		} else {
			out.Id = nil
		}
	}
	out.UpdatedAt = now
	if out.Enabled == nil {
		out.Enabled = proto.Bool(true)
	}
	if out.GetConfigType() == pipelinev1.ConfigType_CONFIG_TYPE_UNSPECIFIED {
		out.ConfigType = pipelinev1.ConfigType_CONFIG_TYPE_ALLOY
	}
	if !validateOnly {
		s.pipelines[out.GetId()] = out
	}
	return proto.Clone(out).(*pipelinev1.Pipeline)
}

func (h *pipelineService) UpsertPipeline(_ context.Context, req *connect.Request[pipelinev1.UpsertPipelineRequest]) (*connect.Response[pipelinev1.Pipeline], error) {
	p := req.Msg.GetPipeline()
	if err := validatePipeline(p); err != nil {
		return nil, err
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vanish[p.GetName()] {
		delete(s.vanish, p.GetName())
		return nil, notFound("pipeline %q was deleted while being updated", p.GetName())
	}
	return connect.NewResponse(s.write(p, s.byName(p.GetName()), req.Msg.GetValidateOnly())), nil
}

func (h *pipelineService) CreatePipeline(_ context.Context, req *connect.Request[pipelinev1.CreatePipelineRequest]) (*connect.Response[pipelinev1.Pipeline], error) {
	p := req.Msg.GetPipeline()
	if err := validatePipeline(p); err != nil {
		return nil, err
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName(p.GetName()) != nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("pipeline %q already exists", p.GetName()))
	}
	return connect.NewResponse(s.write(p, nil, req.Msg.GetValidateOnly())), nil
}

// UpdatePipeline replaces an existing pipeline, found by pipeline.id when it is set (a rename into a name another
// pipeline holds is already_exists) and by name otherwise.
func (h *pipelineService) UpdatePipeline(_ context.Context, req *connect.Request[pipelinev1.UpdatePipelineRequest]) (*connect.Response[pipelinev1.Pipeline], error) {
	p := req.Msg.GetPipeline()
	if err := validatePipeline(p); err != nil {
		return nil, err
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	existing := s.byName(p.GetName())
	if p.Id != nil {
		byID, ok := s.pipelines[p.GetId()]
		if !ok {
			return nil, notFound("pipeline %q not found", p.GetId())
		}
		if existing != nil && existing.GetId() != p.GetId() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("pipeline %q already exists", p.GetName()))
		}
		existing = byID
	}
	if existing == nil {
		return nil, notFound("pipeline %q not found", p.GetName())
	}
	return connect.NewResponse(s.write(p, existing, req.Msg.GetValidateOnly())), nil
}

func (h *pipelineService) GetPipeline(_ context.Context, req *connect.Request[pipelinev1.GetPipelineRequest]) (*connect.Response[pipelinev1.Pipeline], error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pipelines[req.Msg.GetId()]
	if !ok {
		return nil, notFound("pipeline %q not found", req.Msg.GetId())
	}
	return connect.NewResponse(proto.Clone(p).(*pipelinev1.Pipeline)), nil
}

func (h *pipelineService) GetPipelineID(_ context.Context, req *connect.Request[pipelinev1.GetPipelineIDRequest]) (*connect.Response[pipelinev1.GetPipelineIDResponse], error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byName(req.Msg.GetName())
	if p == nil {
		return nil, notFound("pipeline %q not found", req.Msg.GetName())
	}
	return connect.NewResponse(&pipelinev1.GetPipelineIDResponse{Id: p.GetId()}), nil
}

func (h *pipelineService) ListPipelines(_ context.Context, req *connect.Request[pipelinev1.ListPipelinesRequest]) (*connect.Response[pipelinev1.Pipelines], error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pipelinev1.Pipelines{}
	for _, p := range s.pipelines {
		if req.Msg.ConfigType != nil && p.GetConfigType() != req.Msg.GetConfigType() {
			continue
		}
		if req.Msg.Enabled != nil && p.GetEnabled() != req.Msg.GetEnabled() {
			continue
		}
		out.Pipelines = append(out.Pipelines, proto.Clone(p).(*pipelinev1.Pipeline))
	}
	sort.Slice(out.Pipelines, func(i, j int) bool {
		a, _ := strconv.Atoi(out.Pipelines[i].GetId())
		b, _ := strconv.Atoi(out.Pipelines[j].GetId())
		return a < b
	})
	return connect.NewResponse(out), nil
}

// DeletePipeline is idempotent: deleting an ID that does not exist succeeds.
func (h *pipelineService) DeletePipeline(_ context.Context, req *connect.Request[pipelinev1.DeletePipelineRequest]) (*connect.Response[pipelinev1.DeletePipelineResponse], error) {
	if req.Msg.GetId() == "" {
		return nil, invalid("id is required")
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pipelines, req.Msg.GetId())
	return connect.NewResponse(&pipelinev1.DeletePipelineResponse{}), nil
}

var errNoCollectors = errors.New("ids must not be empty")
