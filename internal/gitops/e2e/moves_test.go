package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
)

// TestPruneDisabledKeepsAnObject: an object annotated katastroma.org/prune: disabled stays when the commit no
// longer has it (and leaves the inventory), while its neighbour is pruned.
func TestPruneDisabledKeepsAnObject(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	keep := s("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations: {katastroma.org/prune: disabled}\n" +
		"data:\n  value: \"1\"\n")
	deployOK(t, ns, r, map[string]*string{"deploy/keep.yaml": keep, "deploy/gone.yaml": configMapYAML("gone", "", "1"),
		"deploy/a.yaml": configMapYAML("a", "", "1")})
	Expect(mustCM(ctx, ns, "keep").Data).To(HaveKeyWithValue("value", "1"))

	deployOK(t, ns, r, map[string]*string{"deploy/keep.yaml": nil, "deploy/gone.yaml": nil})
	_, err := getCM(ctx, ns, "gone")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "gone was not pruned: %v", err)
	Expect(mustCM(ctx, ns, "keep").Data).To(HaveKeyWithValue("value", "1"), "the opted-out object was pruned")
	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Prune).To(BeEmpty(), "the kept object is forgotten, not retried")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a"))
}

// TestObjectMovedBetweenTargetsInOnePushSurvives: a ConfigMap moves from target a to target b in one push, and b
// is slow (its clone is held until a has applied). a's pruner waits for b instead of deleting the object, so the
// object is never deleted: same UID, the data an operator added by hand still there, now b's.
func TestObjectMovedBetweenTargetsInOnePushSurvives(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "a", r, "a", "")
	sourceTarget(ctx, ns, "b", r, "b", "")
	deployOK(t, ns, r, map[string]*string{"a/x.yaml": configMapYAML("x", "", "1"), "a/keep.yaml": configMapYAML("ka", "", "1"),
		"b/keep.yaml": configMapYAML("kb", "", "1")})
	x := mustCM(ctx, ns, "x")
	x.Data["written-by-the-app"] = "state"
	Expect(env.Client.Update(ctx, x)).To(Succeed())

	var sha string
	var changed []string
	hold := func(tg source.Target, _ string) {
		if tg.Namespace != ns || tg.Name != "b" {
			return
		}
		// b streams only once a has applied and had time to prune: either a deleted x (what a pruner that does
		// not wait for its siblings does at once) or a recorded the commit two seconds ago and is still waiting
		// for b. (a's stage spans cannot tell: the provisioner span ends only with the pruner it calls.)
		var recorded time.Time
		_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) {
				if _, err := getCM(ctx, ns, "x"); apierrors.IsNotFound(err) {
					return true, nil
				}
				if recorded.IsZero() && mustCM(ctx, ns, "a").Annotations[pipeline.AnnotationDeployed] == sha {
					recorded = time.Now()
				}
				return !recorded.IsZero() && time.Since(recorded) > 2*time.Second, nil
			})
	}
	hookFunc.Store(&hold)
	defer hookFunc.Store(nil)
	sha, changed = r.commit(map[string]*string{"a/x.yaml": nil, "b/x.yaml": configMapYAML("x", "", "1")})
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)

	moved, err := getCM(ctx, ns, "x")
	Expect(err).NotTo(HaveOccurred(), "the moved object is gone")
	Expect(moved.UID).To(Equal(x.UID), "the moved object was deleted and created again")
	Expect(moved.Data).To(HaveKeyWithValue("written-by-the-app", "state"))
	Expect(moved.Labels).To(HaveKeyWithValue(pipeline.LabelSourceTarget, ns+".b"))
}

// TestTwoTargetsClaimingOneObjectIsAnError: target b declares an object target a deployed and still lists; b's
// event fails naming a, and the object stays a's instead of flipping between the two on every event. Both report
// the conflict (katastroma.org/claim-conflict), a as soon as b was refused; once b no longer declares the object,
// both reports are gone.
func TestTwoTargetsClaimingOneObjectIsAnError(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "a", r, "a", "")
	deployOK(t, ns, r, map[string]*string{"a/shared.yaml": configMapYAML("shared", "", "from-a")})
	sourceTarget(ctx, ns, "b", r, "b", "")
	sha, changed := r.commit(map[string]*string{"b/shared.yaml": configMapYAML("shared", "", "from-b"),
		"b/own.yaml": configMapYAML("own", "", "b")})
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))
	Expect(root.Status.Code).To(Equal(codes.Error), "b took over a's object")
	Expect(root.Status.Description).To(ContainSubstring("source target " + ns + "/a deploys this object too"))
	shared := mustCM(ctx, ns, "shared")
	Expect(shared.Labels).To(HaveKeyWithValue(pipeline.LabelSourceTarget, ns+".a"))
	Expect(shared.Data).To(HaveKeyWithValue("value", "from-a"))
	_, err := getCM(ctx, ns, "own")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "b's refused commit wrote: %v", err)
	Expect(mustCM(ctx, ns, "b").Annotations).To(HaveKeyWithValue(source.AnnotationLastError,
		ContainSubstring("ConfigMap "+ns+"/shared")))
	Expect(mustCM(ctx, ns, "b").Annotations).To(HaveKeyWithValue(pipeline.AnnotationClaimConflict,
		"ConfigMap "+ns+"/shared: source target "+ns+"/a deploys it too"))
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKeyWithValue(pipeline.AnnotationClaimConflict,
		"ConfigMap "+ns+"/shared: source target "+ns+"/b declares it too (its events are refused)"),
		"the owner does not report the conflict")

	deployOK(t, ns, r, map[string]*string{"b/shared.yaml": nil})
	Expect(mustCM(ctx, ns, "own").Data).To(HaveKeyWithValue("value", "b"))
	for _, name := range []string{"a", "b"} {
		Expect(mustCM(ctx, ns, name).Annotations).NotTo(HaveKey(pipeline.AnnotationClaimConflict), name)
	}
}

// TestClaimConflictReportGoesWithTheOtherTarget: the owner's claim-conflict report names a target that was
// refused; once that target is deleted, the owner's next event removes the report.
func TestClaimConflictReportGoesWithTheOtherTarget(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "a", r, "a", "")
	deployOK(t, ns, r, map[string]*string{"a/shared.yaml": configMapYAML("shared", "", "from-a")})
	sourceTarget(ctx, ns, "b", r, "b", "")
	sha, changed := r.commit(map[string]*string{"b/shared.yaml": configMapYAML("shared", "", "from-b")})
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))
	Expect(root.Status.Code).To(Equal(codes.Error), "b took over a's object")
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKey(pipeline.AnnotationClaimConflict))

	Expect(env.Client.Delete(ctx, mustCM(ctx, ns, "b"))).To(Succeed())
	Eventually(func() bool { _, err := getCM(ctx, ns, "b"); return apierrors.IsNotFound(err) }).Should(BeTrue())
	deployOK(t, ns, r, map[string]*string{"a/other.yaml": configMapYAML("other", "", "1")})
	Expect(mustCM(ctx, ns, "a").Annotations).NotTo(HaveKey(pipeline.AnnotationClaimConflict))
	Expect(mustCM(ctx, ns, "shared").Data).To(HaveKeyWithValue("value", "from-a"))
}
