package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// StageName names the source handler in metrics.
const StageName = "source"

// ActionTargets counts the source targets an event reached, in katastroma_stage_objects_total.
const ActionTargets = "targets"

// Event types (span attribute event.type).
const (
	EventWebhook = "webhook"
	EventManual  = "manual"
	EventReplay  = "replay"
)

// Results recorded on the source target when its lease is released.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
)

// Handler processes source events: it matches, leases, clones and streams to the renderer. Events run
// asynchronously; Wait drains them.
type Handler struct {
	// Client is the platform identity, uncached (lease updates need the current resourceVersion).
	Client   client.Client
	Renderer katastromav1.RendererServiceClient
	Lease    LeaseConfig
	// Audience is the audience registration API tokens must be issued for (--registration-audience); empty
	// means DefaultRegistrationAudience.
	Audience string
	// Limits bound the subtree shipped to the renderer (zero: pipeline.DefaultLimits, which the renderer enforces
	// too).
	Limits pipeline.Limits
	// BeforeStream, when set, runs after the clone and before the lease check that precedes streaming (a test
	// seam to hold a processor while a newer event takes the lease).
	BeforeStream func(t Target, leaseID string)
	// GitTimeout bounds each git fetch and ref listing (0: DefaultGitTimeout).
	GitTimeout time.Duration
	// Guard checks every repository fetch and ref listing (fetchguard.go); nil refuses every special-purpose
	// range (--repository-allow-cidrs exempts some).
	Guard *netguard.Guard
	// localRepositories lets fetches read file:// repositories (package tests).
	localRepositories bool
	// MaxFetches bounds the git fetches running at once (0: DefaultMaxFetches); see fetch.go.
	MaxFetches int
	// MaxFetchesPerTenant bounds those of one tenant (0: DefaultMaxFetchesPerTenant); MaxFetchBytes bounds what
	// one fetch stores (0: DefaultMaxFetchBytes).
	MaxFetchesPerTenant int
	MaxFetchBytes       int64

	// deliveries remembers webhook deliveries already acted on (replay protection).
	deliveries deliveryLog

	// fetches shares in-flight fetches of one commit between targets.
	fetches fetchGroup

	// rec tracks the periodic reconciles (Reconcile).
	rec reconciler
	// listRef, when set, replaces the ref listing of the polls (a test seam).
	listRef func(ctx context.Context, t Target) (string, error)

	// base is the context events run in: it outlives the request that started them.
	base     context.Context
	inflight sync.WaitGroup
}

// Start sets the context events run in; cancelling it aborts in-flight events.
func (h *Handler) Start(ctx context.Context) { h.base = ctx }

// Wait blocks until every in-flight event finished (graceful drain).
func (h *Handler) Wait() { h.inflight.Wait() }

// WaitFor waits like Wait for at most d and reports whether every event finished. An event cut off then keeps its
// lease until it goes stale, and pharos's crash detection replays it.
func (h *Handler) WaitFor(d time.Duration) bool {
	done := make(chan struct{})
	go func() { h.inflight.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func (h *Handler) baseCtx() context.Context {
	if h.base == nil {
		return context.Background()
	}
	return h.base
}

func tracer() trace.Tracer { return otel.Tracer(stage.TracerName) }

// TargetFromConfigMap reads a source target ConfigMap.
func TargetFromConfigMap(cm *corev1.ConfigMap) (Target, error) {
	t := Target{Namespace: cm.Namespace, Name: cm.Name, RepoURL: cm.Data["repo-url"], Ref: cm.Data["ref"],
		Path: cm.Data["path"], Overrides: cm.Data[legacyOverrides], HelmHooks: cm.Data["helm-hooks"],
		OverridesSecret:  cm.Annotations[AnnotationOverridesSecret],
		VerifyTimeout:    cm.Data["verify-timeout"],
		CredentialSecret: cm.Annotations[pipeline.AnnotationCredentials],
		Offboard:         cm.Annotations[pipeline.AnnotationOffboard] == "true",
		Inputs:           decodeInputs(cm.Annotations[AnnotationRenderInputs]),
		LeaseRef:         cm.Annotations[pipeline.AnnotationLeaseID]}
	if !cm.DeletionTimestamp.IsZero() {
		// A deleted target only runs the offboarding of its deletion (deletion.go): a push, retrieve or replay
		// arriving meanwhile must not deploy again what is being pruned.
		return t, fmt.Errorf("source target %s/%s is being deleted", cm.Namespace, cm.Name)
	}
	var missing []string
	for k, v := range map[string]string{"repo-url": t.RepoURL, "ref": t.Ref, "path": t.Path} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if _, ok := cm.Data["path"]; ok && len(missing) == 1 && missing[0] == "path" {
		missing = nil // an explicitly empty path is the repository root
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("source target %s/%s lacks data %s", cm.Namespace, cm.Name, strings.Join(missing, ", "))
	}
	return t, nil
}

// Targets lists the source targets of a namespace.
func (h *Handler) Targets(ctx context.Context, namespace string) ([]corev1.ConfigMap, error) {
	var l corev1.ConfigMapList
	if err := h.Client.List(ctx, &l, client.InNamespace(namespace),
		client.MatchingLabels{pipeline.LabelType: pipeline.TypeSourceTarget}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Tenant is the namespace's katastroma.org/tenant label, or the namespace name.
func (h *Handler) Tenant(ctx context.Context, namespace string) string {
	ns := &corev1.Namespace{}
	if err := h.Client.Get(ctx, types.NamespacedName{Name: namespace}, ns); err == nil {
		if t := ns.Labels[pipeline.LabelTenant]; t != "" {
			return t
		}
	}
	return namespace
}

// job is one source target of an event, with its span started and its lease taken.
type job struct {
	target  Target
	commit  string
	ctx     context.Context
	span    trace.Span
	leaseID string
}

// EventStartedSpanName is a zero-length child of the root span, ended as soon as the event starts.
const EventStartedSpanName = "event.started"

// startEvent opens the root span of an event and ends an `event.started` child at once. The root span is exported
// only when the whole event ends, so without that child a source handler that dies early (during the clone) would
// leave no span behind and pharos's crash detection could not see the event at all.
func startEvent(kind, tenant string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, attribute.String("event.type", kind), attribute.String("tenant", tenant))
	ctx, span := tracer().Start(context.Background(), "event", trace.WithNewRoot(), trace.WithAttributes(attrs...))
	// The same attributes (katastroma.replay_of included) let pharos attribute the child to the right event even
	// when it arrives before the root.
	// It is exported at once, not with the next batch: a processor that dies in the first seconds of the event
	// must still leave it behind.
	_, started := telemetry.ImmediateTracer(stage.TracerName).Start(ctx, EventStartedSpanName,
		trace.WithAttributes(attrs...))
	started.End()
	return ctx, span
}

// AttrLeaseRef is the attribute, on a source_target span, holding the reference of the lease the target's processor holds (the
// source target's lease annotation), never the lease ID: spans are exported.
const AttrLeaseRef = "lease.ref"

// startTarget opens the source_target span and draws the target's new lease ID.
func startTarget(ctx context.Context, t Target) (context.Context, trace.Span, string) {
	ctx, span := tracer().Start(ctx, "source_target", trace.WithAttributes(
		attribute.String("source_target.name", t.Namespace+"/"+t.Name),
		attribute.String("source_target.repo_url", pipeline.RedactURL(t.RepoURL)), attribute.String("source_target.ref", t.Ref),
		attribute.String("source_target.path", t.Path)))
	return ctx, span, pipeline.NewLeaseID()
}

// newJob starts a target span in ctx (the event's, which the job runs in) and takes the lease for a new event
// (webhook or manual) within lctx.
func (h *Handler) newJob(ctx, lctx context.Context, t Target, commit string) (*job, error) {
	ctx, span, leaseID := startTarget(ctx, t)
	eventID := span.SpanContext().TraceID().String()
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	if err := h.Lease.AcquireNew(lctx, h.Client, key, leaseID, eventID, commit); err != nil {
		err = fmt.Errorf("taking the lease: %w", err)
		stage.End(span, err)
		return nil, err
	}
	span.SetAttributes(attribute.String(AttrLeaseRef, pipeline.LeaseRef(leaseID)), attribute.String("commit", commit))
	return &job{target: t, commit: commit, ctx: ctx, span: span, leaseID: leaseID}, nil
}

// runEvent processes the jobs of an event concurrently and ends the event span (ERROR if any target failed).
func (h *Handler) runEvent(span trace.Span, jobs []*job, preErr error) {
	errs := []error{preErr}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, j := range jobs {
		if !j.target.Offboard {
			h.expectFetch(j.target, j.commit)
		}
	}
	for _, j := range jobs {
		wg.Go(func() {
			if err := h.process(j); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s/%s: %w", j.target.Namespace, j.target.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stage.End(span, errors.Join(errs...))
}

// process clones the job's commit, re-checks the lease and streams the subtree through the pipeline, then
// releases the lease with the result.
func (h *Handler) process(j *job) (err error) {
	ctx, t := j.ctx, j.target
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	result := ResultFailed
	// notes are annotations recorded on the source target with the result: the render inputs once the commit is
	// read, the render warnings once the pipeline answered, the last error.
	var notes map[string]string
	defer func() {
		// Abandoned before streaming or superseded inside a stage: a newer event holds the lease and does the
		// work, so this is no failure, the lease is not ours to release and nothing replays it.
		if errors.Is(err, errAbandoned) || stage.IsSuperseded(err) {
			j.span.SetAttributes(attribute.Bool("abandoned", true), attribute.Bool(stage.AttrSuperseded, true))
			j.span.End()
			err = nil
			return
		}
		if err == nil {
			result = ResultSucceeded
		}
		if notes == nil {
			notes = map[string]string{}
		}
		notes[AnnotationLastError] = lastError(err)
		if rerr := Release(context.WithoutCancel(ctx), h.Client, key, j.leaseID, result, notes); rerr != nil && err == nil {
			err = fmt.Errorf("releasing the lease: %w", rerr)
		}
		stage.End(j.span, err)
	}()
	var chunks []*katastromav1.Chunk
	var targetPath string
	if !t.Offboard {
		// runEvent announced this target's fetch; the commit is freed once every target of it shipped.
		release := sync.OnceFunc(func() { h.releaseFetch(t, j.commit) })
		defer release()
		auth, err := h.auth(ctx, t)
		if err != nil {
			return err
		}
		if t.Overrides, err = h.overrides(ctx, t); err != nil {
			return err
		}
		commit, err := h.sharedFetch(ctx, t, j.commit, auth)
		if err != nil {
			return err
		}
		lim := h.Limits
		if lim.MaxFiles == 0 {
			lim = pipeline.DefaultLimits
		}
		sub, err := ShipSubtree(commit, t.Namespace+"/"+t.Name, t.Path, lim)
		if err != nil {
			return err
		}
		release()
		chunks, targetPath = pipeline.Chunks(sub.Tar), sub.Target
		notes = map[string]string{AnnotationRenderInputs: encodeInputs(sub.Inputs)}
		j.span.SetAttributes(attribute.Int("source.files", sub.Files), attribute.Int("source.tar_bytes", len(sub.Tar)),
			attribute.String("source.subtree", sub.Root))
	}
	if h.BeforeStream != nil {
		h.BeforeStream(t, j.leaseID)
	}
	if err := inventory.CheckLease(ctx, h.Client, t.Namespace, t.Name, j.leaseID); err != nil {
		var lost *inventory.ErrLeaseLost
		if errors.As(err, &lost) {
			return errAbandoned
		}
		return err
	}
	pc := pipeline.Context{Tenant: h.Tenant(ctx, t.Namespace), Namespace: t.Namespace, SourceTarget: t.Name,
		RepoURL: t.RepoURL, Ref: t.Ref, Path: CleanPath(t.Path), Commit: j.commit, LeaseID: j.leaseID,
		EventID: j.span.SpanContext().TraceID().String(), Offboard: t.Offboard}
	sctx, err := pipeline.WithContext(ctx, pc)
	if err != nil {
		return err
	}
	if t.Overrides != "" {
		sctx = metadata.AppendToOutgoingContext(sctx, pipeline.MDOverrides, t.Overrides)
	}
	if targetPath != "" {
		sctx = metadata.AppendToOutgoingContext(sctx, pipeline.MDTargetPath, targetPath)
	}
	if t.HelmHooks != "" {
		sctx = metadata.AppendToOutgoingContext(sctx, pipeline.MDHelmHooks, t.HelmHooks)
	}
	if t.VerifyTimeout != "" {
		sctx = metadata.AppendToOutgoingContext(sctx, pipeline.MDVerifyTimeout, t.VerifyTimeout)
	}
	sum, err := stage.Forward(sctx, h.Renderer.Render, chunks)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if notes == nil {
		notes = map[string]string{}
	}
	notes[pipeline.AnnotationRenderWarnings] = renderWarnings(j.commit, sum)
	stage.CountObject(ctx, StageName, ActionTargets, 1)
	j.span.SetAttributes(attribute.Int("rendered", int(sum.GetObjects())))
	return nil
}

// AnnotationLastError is, on a source target, why its last event failed (removed when one succeeds): what the
// tenant reads next to last-result without searching the traces.
const AnnotationLastError = "katastroma.org/last-error"

// maxLastError bounds the error kept on the source target.
const maxLastError = 1024

func lastError(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if len(msg) > maxLastError {
		msg = msg[:maxLastError] + "…"
	}
	return msg
}

// fetchCommit fetches a target's commit under the git timeout, through the fetch guard.
func (h *Handler) fetchCommit(ctx context.Context, t Target, sha string, auth authMethod) (c *object.Commit, err error) {
	defer func() { err = pipeline.RedactError(err, t.RepoURL) }()
	err = gitDeadline(ctx, h.GitTimeout, "fetching "+pipeline.RedactURL(t.RepoURL), func(ctx context.Context) error {
		ctx = WithFetchGuard(ctx, h.Guard)
		url, err := guardedURL(ctx, t.RepoURL, h.localRepositories)
		if err != nil {
			return err
		}
		if auth, err = guardSSH(ctx, url, auth); err != nil {
			return err
		}
		c, err = FetchCommitBounded(ctx, url, t.Ref, sha, auth, h.MaxFetchBytes)
		return err
	})
	return c, err
}

// resolveRef resolves a target's ref under the git timeout, through the fetch guard.
func (h *Handler) resolveRef(ctx context.Context, t Target, auth authMethod) (sha string, err error) {
	defer func() { err = pipeline.RedactError(err, t.RepoURL) }()
	err = gitDeadline(ctx, h.GitTimeout, "listing "+pipeline.RedactURL(t.RepoURL), func(ctx context.Context) error {
		ctx = WithFetchGuard(ctx, h.Guard)
		url, err := guardedURL(ctx, t.RepoURL, h.localRepositories)
		if err != nil {
			return err
		}
		if auth, err = guardSSH(ctx, url, auth); err != nil {
			return err
		}
		sha, err = ResolveRef(ctx, url, t.Ref, auth)
		return err
	})
	return sha, err
}

func (h *Handler) auth(ctx context.Context, t Target) (authMethod, error) {
	if t.CredentialSecret == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.CredentialSecret}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("credential secret %s/%s does not exist", t.Namespace, t.CredentialSecret)
		}
		return nil, err
	}
	if err := checkCredentialTarget(s, t); err != nil {
		return nil, err
	}
	return AuthFromSecret(s)
}

// renderWarnings describes what the renderer skipped (Helm hooks), for the source target's
// AnnotationRenderWarnings; "" when nothing was skipped.
func renderWarnings(commit string, sum *katastromav1.StageSummary) string {
	var skipped []string
	for _, r := range sum.GetResults() {
		if r.GetAction() == "skipped" && r.GetError() != "" {
			skipped = append(skipped, r.GetError())
		}
	}
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("commit %s: skipped %s", commit, strings.Join(skipped, "; "))
}
