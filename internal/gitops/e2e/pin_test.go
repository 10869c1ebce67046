package e2e

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// platformPipeline is the pipeline of one Platform of the cluster: its source handler runs with the Platform's
// identity (--platform) and counts, per source target of ns, the events it streamed to its renderer.
type platformPipeline struct {
	*runner.Pipeline
	mu       sync.Mutex
	streamed map[string]int
}

func (p *platformPipeline) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streamed[name]
}

func (p *platformPipeline) source() katastromav1.SourceHandlerServiceClient {
	conn, err := stage.Dial(p.Stages[runner.Source].GRPCAddr)
	Expect(err).NotTo(HaveOccurred())
	return katastromav1.NewSourceHandlerServiceClient(conn)
}

// startPlatform runs a second (third…) pipeline against the same API server as the Platform `platform` would.
func startPlatform(t *testing.T, platform, ns string) *platformPipeline {
	ctx, cancel := context.WithCancel(context.Background())
	pp := &platformPipeline{streamed: map[string]int{}}
	p, err := runner.StartAll(ctx, runner.Options{HTTPAddr: "127.0.0.1:0", Config: env.Config,
		Scheme: operator.NewScheme(), ReconcileTick: 200 * time.Millisecond,
		Lease: source.LeaseConfig{Platform: platform},
		// The test git daemon listens on loopback, which the fetch guard refuses unless allowed.
		RepositoryAllowForTesting: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		BeforeStream: func(tg source.Target, _ string) {
			if tg.Namespace == ns {
				pp.mu.Lock()
				pp.streamed[tg.Name]++
				pp.mu.Unlock()
			}
		}})
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		cancel()
		_ = p.Wait()
	})
	pp.Pipeline = p
	return pp
}

// TestATargetIsServedByItsOwnPlatformOnly: a cluster runs two Platforms. A target pinned to Platform A gets a
// push whose webhook reaches Platform B (the wrong one), then A; then B is asked to replay A's event and to
// retrieve the target. The commit is applied once, by A; B refuses each time and says which Platform serves the
// target. An unpinned target whose push reaches both at once is deployed by exactly one, which pins it.
func TestATargetIsServedByItsOwnPlatformOnly(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	a := startPlatform(t, "plat-a/a", ns)
	b := startPlatform(t, "plat-b/b", ns)
	r := gitd.newRepo(t)
	// Polls are off: only the webhooks, the replay and the retrieve below can run the target.
	Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
		Labels:      map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget},
		Annotations: map[string]string{source.AnnotationServedBy: "plat-a/a"}},
		Data: map[string]string{"repo-url": r.url, "ref": r.branch, "path": "deploy",
			source.DataReconcileInterval: "0"}})).To(Succeed())

	sha, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})
	push := r.pushPayload(sha, changed)
	code, body := deliver(b.WebhookURL(), ns, push, webhookSecret, "push")
	Expect(code).To(Equal(http.StatusOK), "the wrong Platform's webhook must not take the target: %v", body)
	Expect(body).To(HaveKeyWithValue("status", "ignored"))
	Expect(body["reason"]).To(ContainSubstring("is served by Platform plat-a/a"))

	code, body = deliver(a.WebhookURL(), ns, push, webhookSecret, "push")
	Expect(code).To(Equal(http.StatusAccepted), "%v", body)
	eventID := body["event_id"].(string)
	Expect(waitEvent(t, eventID).Status.Code).NotTo(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))

	// pharos (or anyone reaching B's gRPC port) replays A's event through B, and asks B to retrieve the target.
	_, err := b.source().Replay(ctx, &katastromav1.ReplayRequest{EventId: eventID})
	Expect(status.Code(err)).To(Equal(grpccodes.FailedPrecondition), "B must refuse the replay: %v", err)
	Expect(err.Error()).To(ContainSubstring("is served by Platform plat-a/a"))
	_, err = b.source().Retrieve(ctx, &katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: "web"})
	Expect(status.Code(err)).To(Equal(grpccodes.FailedPrecondition), "B must refuse the retrieve: %v", err)

	Consistently(func(g Gomega) {
		g.Expect(b.count("web")).To(BeZero(), "Platform B streamed the target")
		g.Expect(a.count("web")).To(Equal(1), "Platform A applies the commit once")
	}, 2*time.Second).Should(Succeed())
	Expect(mustCM(ctx, ns, "web").Annotations).To(And(HaveKeyWithValue(source.AnnotationServedBy, "plat-a/a"),
		HaveKeyWithValue(pipeline.AnnotationEventID, eventID)))

	// An unpinned target: one push delivered to both Platforms at once. The lease update that pins it is fenced
	// by the resourceVersion, so exactly one Platform takes it; the other answers that the target is not its own.
	Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api",
		Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
		Data: map[string]string{"repo-url": r.url, "ref": r.branch, "path": "api",
			source.DataReconcileInterval: "0"}})).To(Succeed())
	sha, changed = r.commit(map[string]*string{"api/b.yaml": configMapYAML("b", "", "1")})
	push = r.pushPayload(sha, changed)
	var wg sync.WaitGroup
	answers := make([]map[string]any, 2)
	got := make([]int, 2)
	for i, p := range []*platformPipeline{a, b} {
		wg.Go(func() { got[i], answers[i] = deliver(p.WebhookURL(), ns, push, webhookSecret, "push") })
	}
	wg.Wait()
	for i := range got {
		Expect(got[i]).To(BeElementOf(http.StatusOK, http.StatusAccepted), "%v", answers[i])
	}
	Eventually(func(g Gomega) {
		g.Expect(a.count("api") + b.count("api")).To(Equal(1))
	}).Should(Succeed())
	owner := "plat-a/a"
	if b.count("api") == 1 {
		owner = "plat-b/b"
	}
	Eventually(func(g Gomega) {
		cm, err := getCM(ctx, ns, "b")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
	}).Should(Succeed())
	Expect(mustCM(ctx, ns, "api").Annotations).To(HaveKeyWithValue(source.AnnotationServedBy, owner))
	Consistently(func() int { return a.count("api") + b.count("api") }, time.Second).Should(Equal(1))
}
