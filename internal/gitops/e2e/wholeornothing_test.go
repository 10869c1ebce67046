package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
)

// TestCommitWithARefusedObjectWritesNothing: admission refuses one object of a commit; the dry run of the whole
// set finds it before the first write, so no object of the commit is written, the event fails naming the object
// and the reason, and the source target still records the previous commit as deployed.
func TestCommitWithARefusedObjectWritesNothing(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	gate := serveAdmissionGate(t)
	ns := gatedNamespace(ctx, newTenant(ctx))
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	sha1 := deployOK(t, ns, r, map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})

	sha2, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "2"),
		"deploy/b.yaml": configMapYAML("b", "", "2"), "deploy/doomed.yaml": configMapYAML(doomedName, "", "2"),
		"deploy/s.yaml": secretYAML("s", "2")})
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha2, changed)))
	Expect(root.Status.Code).To(Equal(codes.Error))
	Expect(root.Status.Description).To(ContainSubstring("ConfigMap " + ns + "/" + doomedName))
	Expect(root.Status.Description).To(ContainSubstring("e2e admission gate refuses"))

	Expect(gate.writes(ns, "b")).To(BeZero(), "an object of the refused commit was created")
	Expect(gate.writes(ns, doomedName)).To(BeZero())
	_, err := getCM(ctx, ns, "b")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "b was applied: %v", err)
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "s"}, &corev1.Secret{})).
		To(MatchError(apierrors.IsNotFound, "the Secret of the refused commit was applied"))
	a := mustCM(ctx, ns, "a")
	Expect(a.Data).To(HaveKeyWithValue("value", "1"), "a was updated by the refused commit")
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha1))

	web := mustCM(ctx, ns, "web")
	Expect(web.Annotations).To(HaveKeyWithValue(pipeline.AnnotationDeployed, sha1))
	Expect(web.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, source.ResultFailed))
	Expect(web.Annotations).To(HaveKeyWithValue(source.AnnotationLastError,
		And(ContainSubstring(ns+"/"+doomedName), ContainSubstring("nothing was applied"))))
	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Commit).To(Equal(sha1))
	Expect(inv.Prune).To(BeEmpty())
}

// TestObjectsOfAnIncompleteApplyArePrunedLater: an event stops after its first write batch (its lease is taken
// away between two batches, as when the provisioner dies mid-apply); what it wrote is on the inventory's prune
// list, so the next commit, which no longer has those objects, deletes them instead of leaving them orphaned.
func TestObjectsOfAnIncompleteApplyArePrunedLater(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	deployOK(t, ns, r, map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})

	sha2, changed := r.commit(map[string]*string{"deploy/s.yaml": secretYAML("s", "2"),
		"deploy/c.yaml": configMapYAML("c", "", "2")})
	var stolen atomic.Bool
	f := func(pc pipeline.Context, gk schema.GroupKind) {
		// Secrets are written first; before the ConfigMaps the event loses its lease and stops there.
		if pc.Namespace != ns || pc.Commit != sha2 || gk.Kind != "ConfigMap" || !stolen.CompareAndSwap(false, true) {
			return
		}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm := mustCM(ctx, ns, "web")
			cm.Annotations[pipeline.AnnotationLeaseID] = "0000000000000001"
			return env.Client.Update(ctx, cm)
		})).To(Succeed())
	}
	batchHook.Store(&f)
	defer batchHook.Store(nil)
	waitEvent(t, accepted(t, ns, r.pushPayload(sha2, changed)))
	Expect(stolen.Load()).To(BeTrue())
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "s"}, &corev1.Secret{})).To(Succeed(),
		"the first batch was written")
	_, err := getCM(ctx, ns, "c")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the second batch was written: %v", err)
	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Prune).To(ContainElement(HaveField("Name", "s")), "the Secret written mid-apply is not recorded")
	// The stand-in for the dead processor's lease goes stale.
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := mustCM(ctx, ns, "web")
		delete(cm.Annotations, pipeline.AnnotationLeaseID)
		return env.Client.Update(ctx, cm)
	})).To(Succeed())

	deployOK(t, ns, r, map[string]*string{"deploy/s.yaml": nil, "deploy/c.yaml": nil,
		"deploy/a.yaml": configMapYAML("a", "", "3")})
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "s"}, &corev1.Secret{})).
		To(MatchError(apierrors.IsNotFound, "the Secret the incomplete apply wrote was left behind"))
	Expect(mustCM(ctx, ns, "a").Data).To(HaveKeyWithValue("value", "3"))
	inv, _, err = inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Prune).To(BeEmpty())
}

// TestWebhookAnswersAfterTheLeasesAreTaken: a 202 means every matching target already records the event and its
// commit (so a crash right after the answer loses nothing: Replay and crash detection find it by the event ID);
// a lease that cannot be taken is not accepted: the answer is 503, and a redelivery deploys.
func TestWebhookAnswersAfterTheLeasesAreTaken(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	serveAdmissionGate(t)
	ns := gatedNamespace(ctx, newTenant(ctx))
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, leaseRefusedName, r, "deploy", "")
	sha, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})

	code, resp := deliver(pipe.WebhookURL(), ns, r.pushPayload(sha, changed), webhookSecret, "push")
	Expect(code).To(Equal(http.StatusServiceUnavailable), "a push whose lease was refused was accepted: %v", resp)
	Expect(resp["error"]).To(And(ContainSubstring(ns+"/"+leaseRefusedName),
		ContainSubstring("e2e admission gate refuses the first update")))

	code, resp = deliver(pipe.WebhookURL(), ns, r.pushPayload(sha, changed), webhookSecret, "push")
	Expect(code).To(Equal(http.StatusAccepted), "%v", resp)
	event := resp["event_id"].(string)
	// Read at once, no waiting: the answer came after the lease.
	tcm := mustCM(ctx, ns, leaseRefusedName)
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventID, event))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventCommit, sha))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationLeaseID, Not(BeEmpty())))
	Expect(waitEvent(t, event).Status.Code).NotTo(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
}

// TestLeaseLostInsideALongBatchStopsIt: a commit of 100 ConfigMaps (one kind) loses its lease after the first
// write batch; the event stops there instead of writing the other objects of the kind.
func TestLeaseLostInsideALongBatchStopsIt(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	files := map[string]*string{}
	for i := range 100 {
		files[fmt.Sprintf("deploy/cm-%03d.yaml", i)] = configMapYAML(fmt.Sprintf("cm-%03d", i), "", "1")
	}
	sha, changed := r.commit(files)
	var fences atomic.Int32
	f := func(pc pipeline.Context, _ schema.GroupKind) {
		// The second lease check of the event: a newer processor took the target over after the first batch.
		if pc.Namespace != ns || pc.Commit != sha || fences.Add(1) != 2 {
			return
		}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm := mustCM(ctx, ns, "web")
			cm.Annotations[pipeline.AnnotationLeaseID] = "0000000000000002"
			return env.Client.Update(ctx, cm)
		})).To(Succeed())
	}
	batchHook.Store(&f)
	defer batchHook.Store(nil)
	waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))
	var l corev1.ConfigMapList
	Expect(env.Client.List(ctx, &l, client.InNamespace(ns),
		client.MatchingLabels{pipeline.LabelSourceTarget: ns + ".web"})).To(Succeed())
	Expect(len(l.Items)).To(BeNumerically("<", 100), "the whole kind was written after the lease moved")
	Expect(l.Items).NotTo(BeEmpty())
}
