package fleetserver

import (
	"context"
	"fmt"
	"sort"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	"github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1/collectorv1connect"
	"google.golang.org/protobuf/proto"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/attributes"
)

type collectorService struct {
	collectorv1connect.UnimplementedCollectorServiceHandler
	s *Server
}

var _ collectorv1connect.CollectorServiceHandler = (*collectorService)(nil)

func cloneCollector(c *collectorv1.Collector) *collectorv1.Collector {
	return proto.Clone(c).(*collectorv1.Collector)
}

func (h *collectorService) GetCollector(_ context.Context, req *connect.Request[collectorv1.GetCollectorRequest]) (*connect.Response[collectorv1.Collector], error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.collectors[req.Msg.GetId()]
	if !ok {
		return nil, notFound("collector %q not found", req.Msg.GetId())
	}
	return connect.NewResponse(cloneCollector(c)), nil
}

// ListCollectors returns the collectors whose local and remote attributes (remote wins) plus collector.id match
// every matcher.
func (h *collectorService) ListCollectors(_ context.Context, req *connect.Request[collectorv1.ListCollectorsRequest]) (*connect.Response[collectorv1.Collectors], error) {
	var matchers []*fleetv1alpha1.Matcher
	for _, m := range req.Msg.GetMatchers() {
		parsed, err := fleetv1alpha1.ParseMatcher(m)
		if err != nil {
			return nil, invalid("matcher %q: %v", m, err)
		}
		matchers = append(matchers, parsed)
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &collectorv1.Collectors{}
	for _, c := range s.collectors {
		attrs := map[string]string{}
		for k, v := range c.GetLocalAttributes() {
			attrs[k] = v
		}
		for k, v := range c.GetRemoteAttributes() {
			attrs[k] = v
		}
		attrs["collector.id"] = c.GetId()
		ok := true
		for _, m := range matchers {
			ok = ok && m.Matches(attrs)
		}
		if ok {
			out.Collectors = append(out.Collectors, cloneCollector(c))
		}
	}
	sort.Slice(out.Collectors, func(i, j int) bool { return out.Collectors[i].GetId() < out.Collectors[j].GetId() })
	return connect.NewResponse(out), nil
}

func (h *collectorService) CreateCollector(_ context.Context, req *connect.Request[collectorv1.CreateCollectorRequest]) (*connect.Response[collectorv1.Collector], error) {
	c := req.Msg.GetCollector()
	if c.GetId() == "" {
		return nil, invalid("collector.id is required")
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.collectors[c.GetId()]; ok {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("collector %q already exists", c.GetId()))
	}
	c = cloneCollector(c)
	c.CreatedAt, c.UpdatedAt = timestamp(s.now()), timestamp(s.now())
	s.collectors[c.GetId()] = c
	return connect.NewResponse(cloneCollector(c)), nil
}

// UpdateCollector replaces the collector's name, enabled flag and remote attributes with exactly what was sent.
func (h *collectorService) UpdateCollector(_ context.Context, req *connect.Request[collectorv1.UpdateCollectorRequest]) (*connect.Response[collectorv1.Collector], error) {
	in := req.Msg.GetCollector()
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.collectors[in.GetId()]
	if !ok {
		return nil, notFound("collector %q not found", in.GetId())
	}
	for k := range in.GetRemoteAttributes() {
		if reason := fleetv1alpha1.ValidateAttributeKey(k); reason != "" {
			return nil, invalid("remote_attributes[%q]: %s", k, reason)
		}
	}
	c.Name, c.Enabled, c.RemoteAttributes = in.GetName(), in.Enabled, in.GetRemoteAttributes()
	c.UpdatedAt = timestamp(s.now())
	return connect.NewResponse(cloneCollector(c)), nil
}

func (h *collectorService) DeleteCollector(_ context.Context, req *connect.Request[collectorv1.DeleteCollectorRequest]) (*connect.Response[collectorv1.DeleteCollectorResponse], error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.collectors[req.Msg.GetId()]; !ok {
		return nil, notFound("collector %q not found", req.Msg.GetId())
	}
	delete(s.collectors, req.Msg.GetId())
	return connect.NewResponse(&collectorv1.DeleteCollectorResponse{}), nil
}

// BulkUpdateCollectors applies the operations, in order, to every listed collector's remote attributes in one
// transaction: any error leaves every collector as it was.
func (h *collectorService) BulkUpdateCollectors(_ context.Context, req *connect.Request[collectorv1.BulkUpdateCollectorsRequest]) (*connect.Response[collectorv1.BulkUpdateCollectorsResponse], error) {
	if len(req.Msg.GetIds()) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errNoCollectors)
	}
	if len(req.Msg.GetOps()) == 0 {
		return nil, invalid("ops must not be empty")
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	updated := map[string]map[string]string{}
	for _, id := range req.Msg.GetIds() {
		c, ok := s.collectors[id]
		if !ok {
			return nil, notFound("collector %q not found", id)
		}
		attrs := map[string]string{}
		for k, v := range c.GetRemoteAttributes() {
			attrs[k] = v
		}
		for i, op := range req.Msg.GetOps() {
			if err := apply(attrs, op); err != nil {
				return nil, invalid("collector %q: ops[%d]: %v", id, i, err)
			}
		}
		updated[id] = attrs
	}
	for id, attrs := range updated {
		c := s.collectors[id]
		c.RemoteAttributes = attrs
		c.UpdatedAt = timestamp(s.now())
	}
	return connect.NewResponse(&collectorv1.BulkUpdateCollectorsResponse{}), nil
}

// apply runs one RFC 6902-style operation on a remote attribute map.
func apply(attrs map[string]string, op *collectorv1.Operation) error {
	key, err := attributes.ParsePath(op.GetPath())
	if err != nil {
		return err
	}
	switch op.GetOp() {
	case collectorv1.Operation_ADD, collectorv1.Operation_REPLACE:
		if op.Value == nil {
			return fmt.Errorf("%s %s needs a value", op.GetOp(), op.GetPath())
		}
		if reason := fleetv1alpha1.ValidateAttributeKey(key); reason != "" {
			return fmt.Errorf("%s: %s", op.GetPath(), reason)
		}
		cur, exists := attrs[key]
		if op.GetOp() == collectorv1.Operation_REPLACE {
			if !exists {
				return fmt.Errorf("replace %s: no such attribute", op.GetPath())
			}
			if op.OldValue != nil && cur != op.GetOldValue() {
				return fmt.Errorf("replace %s: value is not %q", op.GetPath(), op.GetOldValue())
			}
		}
		attrs[key] = op.GetValue()
	case collectorv1.Operation_REMOVE:
		cur, exists := attrs[key]
		if !exists {
			return fmt.Errorf("remove %s: no such attribute", op.GetPath())
		}
		if op.Value != nil && cur != op.GetValue() {
			return fmt.Errorf("remove %s: value is not %q", op.GetPath(), op.GetValue())
		}
		delete(attrs, key)
	case collectorv1.Operation_MOVE, collectorv1.Operation_COPY:
		from, err := attributes.ParsePath(op.GetFrom())
		if err != nil {
			return fmt.Errorf("from: %w", err)
		}
		v, exists := attrs[from]
		if !exists {
			return fmt.Errorf("%s from %s: no such attribute", op.GetOp(), op.GetFrom())
		}
		if op.GetOp() == collectorv1.Operation_MOVE {
			delete(attrs, from)
		}
		attrs[key] = v
	default:
		return fmt.Errorf("unknown op %v", op.GetOp())
	}
	return nil
}
