// Package pipeline holds what every gitops stage shares: the pipeline context carried as W3C baggage, the
// katastroma.org label and annotation keys, and manifest decoding.
package pipeline

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"go.opentelemetry.io/otel/baggage"
	"google.golang.org/grpc/metadata"
)

// Label, annotation and data keys of the katastroma.org prefix.
const (
	LabelType             = "katastroma.org/type"
	TypeSourceTarget      = "source-target"
	TypeInventory         = "inventory"
	LabelTenant           = "katastroma.org/tenant"
	LabelRepo             = "katastroma.org/repo"
	LabelRef              = "katastroma.org/ref"
	LabelPath             = "katastroma.org/path"
	LabelSourceTarget     = "katastroma.org/source-target"
	AnnotationRepo        = "katastroma.org/repo-url"
	AnnotationRef         = "katastroma.org/ref"
	AnnotationPath        = "katastroma.org/path"
	AnnotationCommit      = "katastroma.org/commit"
	AnnotationHash        = "katastroma.org/manifest-hash"
	AnnotationCredentials = "katastroma.org/credential-secret"
	// AnnotationLeaseID, on a source target, is the reference (LeaseRef) of the lease held on it, "" when none.
	AnnotationLeaseID     = "katastroma.org/lease-id"
	AnnotationLeaseStart  = "katastroma.org/lease-started"
	AnnotationReplayCount = "katastroma.org/lease-replay-count"
	AnnotationEventID     = "katastroma.org/event-id"
	AnnotationEventCommit = "katastroma.org/event-commit"
	AnnotationPrevEvent   = "katastroma.org/previous-event-id"
	AnnotationResult      = "katastroma.org/last-result"
	AnnotationOffboard    = "katastroma.org/offboard"
	// AnnotationDeployed, on a source target, is the commit whose objects its inventory records; the record
	// writes it with the source target's resourceVersion as precondition (inventory.Record).
	AnnotationDeployed = "katastroma.org/deployed-commit"
	// AnnotationDriftRepaired, on a source target, reports the last drift the provisioner repaired: the
	// commit, the number of objects and the first of them.
	AnnotationDriftRepaired = "katastroma.org/last-drift-repaired"
	// AnnotationRenderWarnings, on a source target, names what the last render skipped (Helm hooks) and at which
	// commit; removed by the next render that skipped nothing.
	AnnotationRenderWarnings = "katastroma.org/last-render-warnings"
	// AnnotationRenamedFrom, on a source target, names the source target of the same namespace it replaces: it
	// takes over that target's objects and inventory, and that target's deletion prunes nothing.
	AnnotationRenamedFrom = "katastroma.org/renamed-from"
	// AnnotationClaimConflict, on a source target, reports objects another source target of the namespace
	// declares too: on the target whose events the provisioner refuses for it, and on the target that deploys
	// the object. It goes once the conflict is resolved.
	AnnotationClaimConflict = "katastroma.org/claim-conflict"
	// AnnotationServedBy, on a source target, names the Platform (`<namespace>/<name>`) whose source handler
	// serves it; every other Platform's source handler leaves the target alone (source/pin.go).
	AnnotationServedBy = "katastroma.org/served-by"
	FieldManager       = "katastroma"
	// FinalizerPrune holds a deleted source target until what it deployed is pruned (the source handler's
	// deletion pass removes it; the Platform controller too, once no Platform is left to run one).
	FinalizerPrune = "katastroma.org/prune-on-delete"
)

// Metadata keys that travel next to the baggage.
const (
	// MDDirection selects the orderer direction: forward or reversed.
	MDDirection = "direction"
	// MDCount is the number of messages the sender streamed; receivers refuse a stream that ended short.
	MDCount = "manifest-count"
	// MDOverrides carries the source target's overrides (Helm values) to the renderer.
	MDOverrides = "overrides-bin"
	// MDHelmHooks carries the source target's Helm hook policy (data.helm-hooks) to the renderer.
	MDHelmHooks = "helm-hooks"
	// MDVerifyTimeout carries the source target's verify timeout (data.verify-timeout) to the provisioner.
	MDVerifyTimeout = "verify-timeout"
	// MDLease carries the lease ID from stage to stage (stage.Forward passes it on). It is the holder's proof,
	// so it is metadata of the stage calls only: never baggage, which telemetry may copy into spans or carry to
	// other services, and never stored (the source target holds LeaseRef of it).
	MDLease = "katastroma-lease"
)

// Baggage member keys.
const (
	bTenant    = "katastroma.tenant"
	bNamespace = "katastroma.namespace"
	bTarget    = "katastroma.source_target"
	bRepo      = "katastroma.repo_url"
	bRef       = "katastroma.ref"
	bPath      = "katastroma.path"
	bCommit    = "katastroma.commit"
	bEvent     = "katastroma.event_id"
	bOffboard  = "katastroma.offboard"
)

// Context is what every stage needs to know about the source target being processed.
type Context struct {
	Tenant, Namespace, SourceTarget string
	RepoURL, Ref, Path, Commit      string
	// LeaseID is the secret of the event's lease on the source target: whoever presents it writes as the
	// holder, so it travels only as MDLease between stages. The source target records LeaseRef(LeaseID).
	LeaseID  string
	EventID  string
	Offboard bool
}

// NewLeaseID returns a fresh lease secret (128 random bits). It is not the span ID it used to be: span IDs are
// exported with every trace.
func NewLeaseID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics if the system source does)
	return hex.EncodeToString(b)
}

// LeaseRef is what the source target's katastroma.org/lease-id annotation holds for the lease leaseID: a digest,
// so a tenant who reads its source target (or anyone who sees the traces, where it is the lease.ref attribute)
// learns which lease is held but cannot present it. An empty lease has no reference.
func LeaseRef(leaseID string) string {
	if leaseID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("katastroma.org/lease:" + leaseID))
	return hex.EncodeToString(sum[:16])
}

// WithContext returns ctx carrying pc as W3C baggage members (merged into any baggage ctx already has), and
// its lease ID as outgoing MDLease metadata.
func WithContext(ctx context.Context, pc Context) (context.Context, error) {
	b := baggage.FromContext(ctx)
	for k, v := range map[string]string{
		// The repository URL is redacted: baggage reaches every stage and every span they export.
		bTenant: pc.Tenant, bNamespace: pc.Namespace, bTarget: pc.SourceTarget, bRepo: RedactURL(pc.RepoURL), bRef: pc.Ref,
		bPath: pc.Path, bCommit: pc.Commit, bEvent: pc.EventID,
		bOffboard: strconv.FormatBool(pc.Offboard),
	} {
		m, err := baggage.NewMemberRaw(k, v)
		if err != nil {
			return ctx, fmt.Errorf("baggage member %s: %w", k, err)
		}
		if b, err = b.SetMember(m); err != nil {
			return ctx, fmt.Errorf("baggage member %s: %w", k, err)
		}
	}
	ctx = baggage.ContextWithBaggage(ctx, b)
	if pc.LeaseID != "" {
		md, _ := metadata.FromOutgoingContext(ctx)
		md = md.Copy()
		md.Set(MDLease, pc.LeaseID)
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	return ctx, nil
}

// ForwardLease passes the lease of an incoming stage call on to the calls ctx makes, unless ctx sets one itself.
func ForwardLease(ctx context.Context) context.Context {
	if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(MDLease)) > 0 {
		return ctx
	}
	if id := IncomingValue(ctx, MDLease); id != "" {
		return metadata.AppendToOutgoingContext(ctx, MDLease, id)
	}
	return ctx
}

// FromContext reads the pipeline context from ctx's baggage, and the lease ID from the incoming MDLease.
func FromContext(ctx context.Context) Context {
	b := baggage.FromContext(ctx)
	get := func(k string) string { return b.Member(k).Value() }
	return Context{
		Tenant: get(bTenant), Namespace: get(bNamespace), SourceTarget: get(bTarget), RepoURL: get(bRepo),
		Ref: get(bRef), Path: get(bPath), Commit: get(bCommit), LeaseID: IncomingValue(ctx, MDLease), EventID: get(bEvent),
		Offboard: get(bOffboard) == "true",
	}
}

// Validate reports a context a writing stage cannot act on.
func (pc Context) Validate() error {
	switch {
	case pc.Namespace == "":
		return fmt.Errorf("pipeline context has no namespace (baggage %s)", bNamespace)
	case pc.SourceTarget == "":
		return fmt.Errorf("pipeline context has no source target (baggage %s)", bTarget)
	case pc.LeaseID == "":
		return fmt.Errorf("pipeline context has no lease ID (metadata %s)", MDLease)
	}
	return nil
}

// IncomingValue returns the first value of an incoming metadata key.
func IncomingValue(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// WithCount returns ctx with the outgoing message count set.
func WithCount(ctx context.Context, n int) context.Context {
	return metadata.AppendToOutgoingContext(ctx, MDCount, strconv.Itoa(n))
}

// CheckCount fails when the sender announced a count that differs from what arrived.
func CheckCount(ctx context.Context, got int) error {
	v := IncomingValue(ctx, MDCount)
	if v == "" {
		return nil
	}
	want, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("metadata %s=%q is not a number", MDCount, v)
	}
	if want != got {
		return fmt.Errorf("incomplete stream: %d of %d messages arrived", got, want)
	}
	return nil
}
