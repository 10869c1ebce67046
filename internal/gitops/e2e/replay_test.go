package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

func sourceClient() katastromav1.SourceHandlerServiceClient {
	conn, err := stage.Dial(pipe.Stages[runner.Source].GRPCAddr)
	Expect(err).NotTo(HaveOccurred())
	return katastromav1.NewSourceHandlerServiceClient(conn)
}

const podTemplate = `apiVersion: v1
kind: PodTemplate
metadata:
  name: pt
template:
  spec:
    containers: [{name: c, image: busybox}]
`

func TestReplayDeploysTheFailedEventsCommit(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	// The provisioner may not write PodTemplates yet, so event A fails.
	shaA, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "A"),
		"deploy/pt.yaml": s(podTemplate)})
	eventA := accepted(t, ns, r.pushPayload(shaA, changed))
	root := waitEvent(t, eventA)
	Expect(root.Status.Code).To(Equal(codes.Error))
	Expect(named(traceSpans(eventA), "provisioner")[0].Status.Code).To(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "web").Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "failed"))
	Expect(inventoryKeys(ctx, ns)).To(BeEmpty(), "no inventory after a failed apply")

	// The branch moves on without a webhook; then the permission is fixed.
	shaB, _ := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "B")})
	role := &rbacv1.Role{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "provisioner"}, role)).To(Succeed())
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"podtemplates"},
		Verbs: tenancy.ProvisionerVerbs})
	Expect(env.Client.Update(ctx, role)).To(Succeed())

	src := sourceClient()
	resp, err := src.Replay(ctx, &katastromav1.ReplayRequest{EventId: eventA})
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.GetSourceTargets()).To(ConsistOf(ns + "/web"))
	replay := waitEvent(t, resp.GetEventId())
	Expect(replay.Status.Code).NotTo(Equal(codes.Error), replay.Status.Description)
	Expect(replay.Attributes).To(ContainElement(And(HaveField("Key", BeEquivalentTo("event.type")),
		HaveField("Value.AsString()", "replay"))))
	a := mustCM(ctx, ns, "a")
	Expect(a.Data).To(HaveKeyWithValue("value", "A"), "the replay deploys event A's commit, not the branch head")
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, shaA))
	Expect(a.Annotations[pipeline.AnnotationCommit]).NotTo(Equal(shaB))
	tcm := mustCM(ctx, ns, "web")
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationReplayCount, "1"))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventID, eventA))

	// A replay is refused while another processor holds the lease.
	entered, release := holdNext(ns)
	second, err := src.Replay(ctx, &katastromav1.ReplayRequest{EventId: eventA})
	Expect(err).NotTo(HaveOccurred())
	Eventually(entered).Should(Receive())
	_, err = src.Replay(ctx, &katastromav1.ReplayRequest{EventId: eventA})
	Expect(status.Code(err)).To(Equal(grpccodes.FailedPrecondition), "%v", err)
	Expect(err.Error()).To(ContainSubstring("is active"))
	close(release)
	waitEvent(t, second.GetEventId())
	hookFunc.Store(nil)

	// A newer event holding the lease supersedes A: replays of A are refused.
	entered, release = holdNext(ns)
	defer hookFunc.Store(nil)
	shaC, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "C")})
	eventC := accepted(t, ns, r.pushPayload(shaC, changed))
	Eventually(entered).Should(Receive())
	_, err = src.Replay(ctx, &katastromav1.ReplayRequest{EventId: eventA})
	Expect(stage.IsSuperseded(err)).To(BeTrue(), "superseded is final, not a refusal to retry: %v", err)
	close(release)
	Expect(waitEvent(t, eventC).Status.Code).NotTo(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "a").Data).To(HaveKeyWithValue("value", "C"))

	_, err = src.Replay(ctx, &katastromav1.ReplayRequest{EventId: "00000000000000000000000000000001"})
	Expect(status.Code(err)).To(Equal(grpccodes.NotFound))
}

func TestImpersonationDeniesWritesOutsideTheTenant(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	victim := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-victim"}}
	Expect(env.Client.Create(ctx, victim)).To(Succeed())
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "", "")
	sha, changed := r.commit(map[string]*string{"own.yaml": configMapYAML("own", "", "1"),
		"evil.yaml": configMapYAML("evil", victim.Name, "1")})
	eventID := accepted(t, ns, r.pushPayload(sha, changed))
	root := waitEvent(t, eventID)
	Expect(root.Status.Code).To(Equal(codes.Error))
	Expect(root.Status.Description).To(ContainSubstring("forbidden"))
	_, err := getCM(ctx, victim.Name, "evil")
	Expect(apierrors.IsNotFound(err)).To(BeTrue())
	Expect(named(traceSpans(eventID), "pruner")).To(BeEmpty(), "no pruning after a failed apply")
	Expect(inventoryKeys(ctx, ns)).To(BeEmpty())
}

func TestRetrieveAndOffboarding(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha, _ := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	src := sourceClient()

	resp, err := src.Retrieve(ctx, &katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: "web"})
	Expect(err).NotTo(HaveOccurred())
	root := waitEvent(t, resp.GetEventId())
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))

	tcm := mustCM(ctx, ns, "web")
	tcm.Annotations[pipeline.AnnotationOffboard] = "true"
	Expect(env.Client.Update(ctx, tcm)).To(Succeed())
	resp, err = src.Retrieve(ctx, &katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: "web"})
	Expect(err).NotTo(HaveOccurred())
	root = waitEvent(t, resp.GetEventId())
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	_, err = getCM(ctx, ns, "a")
	Expect(apierrors.IsNotFound(err)).To(BeTrue())
	_, err = getCM(ctx, ns, "katastroma-inventory-web")
	Expect(apierrors.IsNotFound(err)).To(BeTrue())

	_, err = src.Retrieve(ctx, &katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: "nope"})
	Expect(status.Code(err)).To(Equal(grpccodes.NotFound))
}
