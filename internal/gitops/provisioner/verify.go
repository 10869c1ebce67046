package provisioner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Health is what the verify makes of an object's kstatus.
type Health string

// Health values: Current (healthy), Failed (will not become healthy without a change) and InProgress (not yet).
const (
	Current    Health = "Current"
	Failed     Health = "Failed"
	InProgress Health = "InProgress"
)

// DefaultVerifyTimeout bounds the verify when the Server sets no VerifyTimeout. The verify runs inside the
// provisioner's RPC, which the stages' default RPC deadline (5m) bounds together with fetching, rendering and
// applying, so it leaves two minutes for those; and it stays well below the source handler's lease-stale-after
// (10m), so a verifying event never looks crashed.
const DefaultVerifyTimeout = 3 * time.Minute

// VerifyEvent is the span event recorded for an object each time its health is first seen or changes.
const VerifyEvent = "verify.object"

// HealthOf maps an object's kstatus to its health. kstatus Current is Current and Failed is Failed; InProgress,
// Terminating, Unknown and an object that cannot be read (nil) are InProgress, which the verify waits on until
// its deadline. The message says why, with the conditions kstatus found behind a failure.
func HealthOf(u *unstructured.Unstructured) (Health, string) {
	if u == nil {
		return InProgress, "not found"
	}
	res, err := status.Compute(u)
	if err != nil {
		return InProgress, "kstatus: " + err.Error()
	}
	msg := res.Message
	switch res.Status {
	case status.CurrentStatus:
		return Current, msg
	case status.FailedStatus:
		for _, c := range res.Conditions {
			if c.Message != "" && !strings.Contains(msg, c.Message) {
				msg += ": " + c.Message
			}
		}
		return Failed, msg
	}
	if res.Status != status.InProgressStatus {
		msg = string(res.Status) + ": " + msg
	}
	return InProgress, msg
}

// objectHealth is one applied object's last seen health.
type objectHealth struct {
	ref     *katastromav1.ObjectRef
	health  Health
	message string
}

func (o *objectHealth) String() string {
	return fmt.Sprintf("%s %s/%s %s: %s", o.ref.GetKind(), o.ref.GetNamespace(), o.ref.GetName(), o.health, o.message)
}

// verify waits until every applied object is Current, one is Failed, or timeout passes, reading the objects as
// the tenant's provisioner (one list per kind and namespace and round; get and list are what the tenant's Role
// grants besides the writes, no watch) and checking the lease before each round. Each object's health is a span
// event when first seen and whenever it changes. A Failed object or the deadline fails the stage (Aborted) naming
// the first unhealthy object; a lost lease ends it superseded.
func (a *applier) verify(ctx context.Context, span trace.Span, timeout, interval time.Duration) error {
	if len(a.applied) == 0 {
		return nil
	}
	outcome, err := a.verifyUntil(ctx, span, timeout, interval)
	verifies.WithLabelValues(a.pc.Tenant, outcome).Inc()
	return err
}

// verifyUntil polls the applied objects' health until an answer or the deadline, and reports the outcome.
func (a *applier) verifyUntil(ctx context.Context, span trace.Span, timeout, interval time.Duration) (string, error) {
	objs := make([]*objectHealth, 0, len(a.applied))
	for _, r := range a.applied {
		objs = append(objs, &objectHealth{ref: r})
	}
	start := time.Now()
	ctxDeadline, hasDeadline := ctx.Deadline()
	deadline, byCall := verifyDeadline(start, timeout, ctxDeadline, hasDeadline)
	after := timeout.String()
	if byCall {
		after = fmt.Sprintf("%s (before the call's deadline)", deadline.Sub(start).Round(100*time.Millisecond))
	}
	a.seed(span, objs)
	for {
		if err := verifyFence(ctx, a.clients.Platform, a.pc); err != nil {
			return VerifyAborted, err
		}
		if err := a.observe(ctx, span, objs); err != nil {
			if ctx.Err() != nil {
				// Cancelled, not unreachable: say so rather than blame the API server.
				return VerifyAborted, grpcstatus.Errorf(codes.Canceled, "verify: %v", ctx.Err())
			}
			return VerifyAborted, grpcstatus.Errorf(codes.Unavailable, "verify: reading the applied objects: %v", err)
		}
		counts := map[Health]int{}
		var failed, waiting *objectHealth
		for _, o := range objs {
			counts[o.health]++
			switch {
			case o.health == Failed && failed == nil:
				failed = o
			case o.health == InProgress && waiting == nil:
				waiting = o
			}
		}
		span.SetAttributes(attribute.Int("provisioner.verify.current", counts[Current]),
			attribute.Int("provisioner.verify.failed", counts[Failed]),
			attribute.Int("provisioner.verify.in_progress", counts[InProgress]),
			attribute.Float64("provisioner.verify.seconds", time.Since(start).Seconds()))
		switch {
		case failed != nil:
			return VerifyFailed, grpcstatus.Errorf(codes.Aborted, "verify: %d of %d objects failed; first: %s",
				counts[Failed], len(objs), failed)
		case waiting == nil:
			return VerifyHealthy, nil
		case !time.Now().Before(deadline):
			return VerifyTimedOut, grpcstatus.Errorf(codes.Aborted, "verify: %d of %d objects not healthy after %s; first: %s",
				counts[InProgress], len(objs), after, waiting)
		}
		select {
		case <-ctx.Done():
			return VerifyAborted, grpcstatus.Errorf(codes.Canceled, "verify: %v; first unhealthy: %s", ctx.Err(), waiting)
		case <-time.After(min(interval, time.Until(deadline))):
		}
	}
}

// verifyDeadline is when the verify gives up: timeout after start, or earlier when the call's own deadline
// (ctxDeadline, which fetching, rendering and applying already used part of) comes first. Then it stops a margin
// before that deadline (5% of what is left, 1s to 10s), so it still answers with the unhealthy object before the
// caller gives up. byCall says the call's deadline decided.
func verifyDeadline(start time.Time, timeout time.Duration, ctxDeadline time.Time, hasDeadline bool) (deadline time.Time, byCall bool) {
	deadline = start.Add(timeout)
	if !hasDeadline {
		return deadline, false
	}
	margin := min(max(ctxDeadline.Sub(start)/20, time.Second), 10*time.Second)
	if byCtx := ctxDeadline.Add(-margin); byCtx.Before(deadline) {
		return byCtx, true
	}
	return deadline, false
}

// observe reads every object not yet Current and updates its health, recording changes as span events.
func (a *applier) observe(ctx context.Context, span trace.Span, objs []*objectHealth) error {
	type group struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	todo := map[group][]*objectHealth{}
	for _, o := range objs {
		if o.health == Current {
			continue // Current stays: a later round only waits on the others
		}
		gv, err := schema.ParseGroupVersion(o.ref.GetApiVersion())
		if err != nil {
			return err
		}
		g := group{gvk: gv.WithKind(o.ref.GetKind()), namespace: o.ref.GetNamespace()}
		todo[g] = append(todo[g], o)
	}
	keys := make([]group, 0, len(todo))
	for g := range todo {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	for _, g := range keys {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(g.gvk.GroupVersion().WithKind(g.gvk.Kind + "List"))
		var opts []client.ListOption
		if g.namespace != "" {
			opts = append(opts, client.InNamespace(g.namespace))
		}
		if a.targetLabel != "" {
			opts = append(opts, client.MatchingLabels{pipeline.LabelSourceTarget: a.targetLabel})
		}
		if err := a.as.List(ctx, list, opts...); err != nil {
			return fmt.Errorf("listing %s in %q: %w", g.gvk.Kind, g.namespace, err)
		}
		live := make(map[string]*unstructured.Unstructured, len(list.Items))
		for i := range list.Items {
			live[list.Items[i].GetName()] = &list.Items[i]
		}
		for _, o := range todo[g] {
			judge(span, o, live[o.ref.GetName()])
		}
	}
	return nil
}

// judge updates o's health from its live object (nil: not found), recording a change as a span event.
func judge(span trace.Span, o *objectHealth, live *unstructured.Unstructured) {
	h, msg := HealthOf(live)
	if h == o.health && msg == o.message {
		return
	}
	o.health, o.message = h, msg
	span.AddEvent(VerifyEvent, trace.WithAttributes(attribute.String("object.kind", o.ref.GetKind()),
		attribute.String("object.namespace", o.ref.GetNamespace()),
		attribute.String("object.name", o.ref.GetName()), attribute.String("health.status", string(h)),
		attribute.String("health.message", msg)))
}

// seed judges the objects this event left unchanged from the live objects its apply listed moments ago
// (liveLabelled), before the first round: their state is what the API server answered during this event, and
// reading them again is the verify's largest cost on a push that writes nothing (a second list of every object,
// 1,000 ConfigMaps decoded in the no-change benchmark). Only what is not Current there is read by the rounds;
// written objects are always read.
func (a *applier) seed(span trace.Span, objs []*objectHealth) {
	unchanged := map[*katastromav1.ObjectRef]bool{}
	for _, r := range a.results {
		if r.GetAction() == ActionUnchanged {
			unchanged[r.GetObject()] = true
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, o := range objs {
		if !unchanged[o.ref] {
			continue
		}
		gv, err := schema.ParseGroupVersion(o.ref.GetApiVersion())
		if err != nil {
			continue
		}
		live := a.live[liveKey{gvk: gv.WithKind(o.ref.GetKind()), namespace: o.ref.GetNamespace()}][o.ref.GetName()]
		if live != nil && live.GetLabels()[pipeline.LabelSourceTarget] == a.targetLabel {
			judge(span, o, live)
		}
	}
}

// verifyFence is the lease check of a verify round: reading needs no fence, but once a newer event holds the
// lease this event's health no longer decides anything.
func verifyFence(ctx context.Context, c client.Client, pc pipeline.Context) error {
	if err := inventory.CheckLease(ctx, c, pc.Namespace, pc.SourceTarget, pc.LeaseID); err != nil {
		return LeaseError(err)
	}
	return nil
}
