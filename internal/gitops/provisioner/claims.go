package provisioner

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Two source targets that declare the same object would take it from each other on every event (server-side apply
// with force), each pruning nothing and repairing "drift" forever. So before writing, an object live under another
// target's label is checked: while that target exists and its inventory lists the object, the event is refused
// naming both. An object its previous target no longer lists (a move over two pushes, a deleted target) is
// adopted, and so is one whose previous target runs in the same event (a move in one push: its pruner waits for
// this one, see pruner/moves.go) or that this target's predecessor deployed (a rename, rename.go).
//
// The conflict is an error on both targets: the refused one fails and both carry
// pipeline.AnnotationClaimConflict (reportClaims), the target that keeps the object from the moment the other one
// was refused, until the other one's next event no longer declares it or the other one is gone.

// predecessor is the source target this one replaces (pipeline.AnnotationRenamedFrom; "" when none). A
// ConfigMap cannot be renamed: a renamed target is a new one naming the old one, which is deleted. The new one
// takes the old one's objects over here, and its inventory in the pruner (pruner/rename.go).
func (a *applier) predecessor() string {
	if a.target == nil {
		return ""
	}
	if p := a.target.Annotations[pipeline.AnnotationRenamedFrom]; p != a.pc.SourceTarget {
		return p
	}
	return ""
}

// claimConflict is a refusal because source target owner (same namespace) deploys the object.
type claimConflict struct {
	namespace, owner string
}

func (c *claimConflict) Error() string {
	return fmt.Sprintf("source target %s/%s deploys this object too (its inventory lists it); one object "+
		"cannot belong to two source targets: remove it from one of them, or move it in one push", c.namespace, c.owner)
}

// checkClaim refuses u when another source target owns it (see above); nil when u is free or this target's.
func (a *applier) checkClaim(ctx context.Context, u *unstructured.Unstructured) error {
	ours := u.GetLabels()[pipeline.LabelSourceTarget]
	if ours == "" {
		return nil
	}
	live, err := a.liveLabelled(ctx, u)
	if err != nil || live == nil {
		return err
	}
	owner := live.GetLabels()[pipeline.LabelSourceTarget]
	ns, name, ok := strings.Cut(owner, ".")
	if owner == ours || !ok {
		return nil // ours, or a hashed label naming no readable target: adopted as before
	}
	if ns == a.pc.Namespace && name == a.predecessor() {
		return nil // renamed: this target takes over what its predecessor deployed
	}
	st := &corev1.ConfigMap{}
	if err := a.clients.Platform.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, st); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading source target %s/%s, which deployed this object: %w", ns, name, err)
	}
	if st.Labels[pipeline.LabelType] != pipeline.TypeSourceTarget || st.Annotations[pipeline.AnnotationEventID] == a.pc.EventID {
		return nil
	}
	inv, _, err := inventory.Read(ctx, a.clients.Platform, ns, name)
	if err != nil {
		return err
	}
	key := pipeline.RefKey(pipeline.Ref(u))
	for _, r := range inv.Objects {
		if pipeline.RefKey(r) == key {
			if ns == a.pc.Namespace {
				a.mu.Lock()
				if a.claims == nil {
					a.claims = map[string][]string{}
				}
				a.claims[name] = append(a.claims[name], u.GetKind()+" "+objectName(pipeline.Ref(u)))
				a.mu.Unlock()
			}
			return &claimConflict{namespace: ns, owner: name}
		}
	}
	return nil
}

// A claim-conflict annotation holds segments joined by "; ", each naming one object and the other target:
//
//	<Kind> <namespace/name>: source target <ns>/<owner> deploys it too                        (on the refused target)
//	<Kind> <namespace/name>: source target <ns>/<claimant> declares it too (its events are refused) (on the owner)
const (
	claimSep       = "; "
	claimantSuffix = "deploys it too"
	ownerSuffix    = "declares it too (its events are refused)"
)

var claimSegment = regexp.MustCompile(`^(.+): source target ([^/ ]+)/([^ ]+) (` + regexp.QuoteMeta(claimantSuffix) +
	`|` + regexp.QuoteMeta(ownerSuffix) + `)$`)

// segment is one parsed conflict of a claim-conflict annotation.
type segment struct {
	object, other string
	// owner: the annotated target deploys the object and other declares it too.
	owner bool
}

func formatSegment(ns string, s segment) string {
	suffix := claimantSuffix
	if s.owner {
		suffix = ownerSuffix
	}
	return fmt.Sprintf("%s: source target %s/%s %s", s.object, ns, s.other, suffix)
}

func parseSegments(v string) []segment {
	var out []segment
	for _, part := range strings.Split(v, claimSep) {
		if m := claimSegment.FindStringSubmatch(part); m != nil {
			out = append(out, segment{object: m[1], other: m[3], owner: m[4] == ownerSuffix})
		}
	}
	return out
}

func formatSegments(ns string, segs []segment) string {
	parts := make([]string, 0, len(segs))
	for _, s := range segs {
		parts = append(parts, formatSegment(ns, s))
	}
	sort.Strings(parts)
	return strings.Join(slices.Compact(parts), claimSep)
}

// reportClaims brings the claim-conflict annotations in line with this event's dry run: on this target, its
// refused claims (a.claims) replace the earlier ones, and the reports of targets that declared what this target
// deploys are kept while those targets still report the claim; on every owner this target claims from, or
// claimed from before, this target's report is set or removed. Best effort: a failed write is recorded on the
// span and corrected by a later event; the event's outcome does not depend on it.
func (a *applier) reportClaims(ctx context.Context) {
	if a.target == nil {
		return
	}
	self := a.pc.SourceTarget
	a.mu.Lock()
	current := map[string][]string{}
	for owner, objs := range a.claims {
		current[owner] = append([]string(nil), objs...)
	}
	a.mu.Unlock()
	old := parseSegments(a.target.Annotations[pipeline.AnnotationClaimConflict])
	if len(old) == 0 && len(current) == 0 {
		return // the common case: no conflict now or before, nothing read or written
	}
	var next []segment
	owners := map[string]bool{}
	for owner, objs := range current {
		owners[owner] = true
		for _, o := range objs {
			next = append(next, segment{object: o, other: owner})
		}
	}
	var errs []string
	for _, s := range old {
		switch {
		case !s.owner:
			owners[s.other] = true // claimed from before: its report of this target is brought up to date below
		case a.stillClaims(ctx, s.other):
			next = append(next, s)
		}
	}
	if err := a.setClaimSegments(ctx, self, func([]segment) []segment { return next }); err != nil {
		errs = append(errs, err.Error())
	}
	for owner := range owners {
		err := a.setClaimSegments(ctx, owner, func(have []segment) []segment {
			out := slices.DeleteFunc(slices.Clone(have), func(s segment) bool { return s.owner && s.other == self })
			for _, o := range current[owner] {
				out = append(out, segment{object: o, other: self, owner: true})
			}
			return out
		})
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.Int("provisioner.claim_conflicts", len(next)))
	if len(errs) > 0 {
		span.AddEvent("claim.report.failed", trace.WithAttributes(attribute.String("error", strings.Join(errs, "; "))))
	}
}

// stillClaims reports whether source target other (this namespace) still reports declaring an object this target
// deploys; a target gone no longer does.
func (a *applier) stillClaims(ctx context.Context, other string) bool {
	st := &corev1.ConfigMap{}
	if err := a.clients.Platform.Get(ctx, types.NamespacedName{Namespace: a.pc.Namespace, Name: other}, st); err != nil {
		return !apierrors.IsNotFound(err) // unreadable: keep the report
	}
	for _, s := range parseSegments(st.Annotations[pipeline.AnnotationClaimConflict]) {
		if !s.owner && s.other == a.pc.SourceTarget {
			return true
		}
	}
	return false
}

// setClaimSegments rewrites the claim-conflict annotation of source target name with edit (an update at the read
// resourceVersion, retried on conflict; nothing is written when it does not change).
func (a *applier) setClaimSegments(ctx context.Context, name string, edit func([]segment) []segment) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		st := &corev1.ConfigMap{}
		if err := a.clients.Platform.Get(ctx, types.NamespacedName{Namespace: a.pc.Namespace, Name: name}, st); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		before := st.Annotations[pipeline.AnnotationClaimConflict]
		after := formatSegments(a.pc.Namespace, edit(parseSegments(before)))
		if after == before {
			return nil
		}
		if st.Annotations == nil {
			st.Annotations = map[string]string{}
		}
		if after == "" {
			delete(st.Annotations, pipeline.AnnotationClaimConflict)
		} else {
			st.Annotations[pipeline.AnnotationClaimConflict] = after
		}
		return a.clients.Platform.Update(ctx, st)
	})
}
