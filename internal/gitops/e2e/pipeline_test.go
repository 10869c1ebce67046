package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// stageSpans are the spans every successful source target has in its event's trace.
var stageSpans = []string{"source_target", "renderer", "orderer", "labeler", "provisioner", "pruner"}

func traceSpans(eventID string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID().String() == eventID {
			out = append(out, s)
		}
	}
	return out
}

func named(ss tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range ss {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// waitEvent waits until the event's root span ended and returns it.
func waitEvent(t *testing.T, eventID string) tracetest.SpanStub {
	t.Helper()
	var root tracetest.SpanStub
	Eventually(func(g Gomega) {
		ev := named(traceSpans(eventID), "event")
		g.Expect(ev).To(HaveLen(1))
		root = ev[0]
	}).Should(Succeed())
	return root
}

func accepted(t *testing.T, ns string, body []byte) string {
	t.Helper()
	code, resp := deliver(pipe.WebhookURL(), ns, body, webhookSecret, "push")
	Expect(code).To(Equal(http.StatusAccepted), "%v", resp)
	return resp["event_id"].(string)
}

func getCM(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
}

func mustCM(ctx context.Context, ns, name string) *corev1.ConfigMap {
	cm, err := getCM(ctx, ns, name)
	Expect(err).NotTo(HaveOccurred())
	return cm
}

func inventoryKeys(ctx context.Context, ns string) []string {
	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range inv.Objects {
		out = append(out, r.GetKind()+"/"+r.GetName())
	}
	return out
}

func TestPlainApplyNoChangeAndPrune(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha1, changed := r.commit(map[string]*string{
		"deploy/a.yaml": configMapYAML("a", "", "1"), "deploy/b.yaml": configMapYAML("b", "", "1"),
		"deploy2/x.yaml": configMapYAML("x", "", "1"), "other/c.yaml": configMapYAML("c", "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")

	eventID := accepted(t, ns, r.pushPayload(sha1, changed))
	root := waitEvent(t, eventID)
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)

	a := mustCM(ctx, ns, "a")
	Expect(a.Labels).To(HaveKeyWithValue(pipeline.LabelTenant, "team-"+ns[7:]))
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha1))
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationPath, "deploy"))
	Expect(a.ManagedFields).To(ContainElement(HaveField("Manager", pipeline.FieldManager)))
	mustCM(ctx, ns, "b")
	for _, n := range []string{"x", "c"} {
		_, err := getCM(ctx, ns, n)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s lies outside the target path", n)
	}
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a", "ConfigMap/b"))

	// One trace per event: the event root, one source_target span with the seed's attributes, a span per stage.
	ts := traceSpans(eventID)
	for _, n := range stageSpans {
		want := 1
		if n == "orderer" {
			want = 2 // forward for the provisioner, reversed for the pruner
		}
		Expect(named(ts, n)).To(HaveLen(want), "span %s", n)
	}
	st := named(ts, "source_target")[0]
	Expect(st.Parent.SpanID()).To(Equal(root.SpanContext.SpanID()))
	Expect(st.Attributes).To(ContainElement(HaveField("Key", BeEquivalentTo("source_target.repo_url"))))
	Expect(root.Attributes).To(ContainElement(HaveField("Key", BeEquivalentTo("github.delivery_id"))))
	// The lease was released and the result recorded.
	tcm := mustCM(ctx, ns, "web")
	Expect(tcm.Annotations).NotTo(HaveKey(pipeline.AnnotationLeaseID))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "succeeded"))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventCommit, sha1))

	// A push that changes no manifest writes nothing.
	rvA, rvB := a.ResourceVersion, mustCM(ctx, ns, "b").ResourceVersion
	sha2, changed := r.commit(map[string]*string{"deploy/README.md": s("docs only")})
	eventID = accepted(t, ns, r.pushPayload(sha2, changed))
	Expect(waitEvent(t, eventID).Status.Code).NotTo(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "a").ResourceVersion).To(Equal(rvA))
	Expect(mustCM(ctx, ns, "b").ResourceVersion).To(Equal(rvB))
	prov := named(traceSpans(eventID), "provisioner")[0]
	Expect(prov.Attributes).To(ContainElement(And(HaveField("Key", BeEquivalentTo("provisioner.applied")),
		HaveField("Value.AsInt64()", BeEquivalentTo(0)))))

	// Removing a manifest prunes exactly it.
	sha3, changed := r.commit(map[string]*string{"deploy/b.yaml": nil})
	eventID = accepted(t, ns, r.pushPayload(sha3, changed))
	Expect(waitEvent(t, eventID).Status.Code).NotTo(Equal(codes.Error))
	_, err := getCM(ctx, ns, "b")
	Expect(apierrors.IsNotFound(err)).To(BeTrue())
	mustCM(ctx, ns, "a")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a"))
}

const kustomization = `resources: [cm.yaml]
namePrefix: k-
`

const chart = `apiVersion: v2
name: demo
version: 0.1.0
`

const chartCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cfg
data:
  color: {{ .Values.color | quote }}
`

func TestKustomizeAndHelmTargetsInOneEvent(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha, changed := r.commit(map[string]*string{
		"kust/kustomization.yaml": s(kustomization), "kust/cm.yaml": configMapYAML("cfg", "", "k"),
		"chart/Chart.yaml": s(chart), "chart/values.yaml": s("color: red\n"), "chart/templates/cm.yaml": s(chartCM)})
	sourceTarget(ctx, ns, "kust", r, "kust", "")
	sourceTarget(ctx, ns, "web", r, "chart", "color: blue\n")

	eventID := accepted(t, ns, r.pushPayload(sha, changed))
	root := waitEvent(t, eventID)
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "k-cfg").Data).To(HaveKeyWithValue("value", "k"))
	Expect(mustCM(ctx, ns, "web-cfg").Data).To(HaveKeyWithValue("color", "blue"))
	ts := traceSpans(eventID)
	for _, n := range stageSpans {
		want := 2
		if n == "orderer" {
			want = 4 // forward and reversed per source target
		}
		Expect(named(ts, n)).To(HaveLen(want), "%s spans for two source targets", n)
	}
}

func TestWebhookRejections(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	body := r.pushPayload(sha, changed)

	code, _ := deliver(pipe.WebhookURL(), "no-such-namespace", body, webhookSecret, "push")
	Expect(code).To(Equal(http.StatusNotFound))
	code, _ = deliver(pipe.WebhookURL(), ns, body, "wrong-secret", "push")
	Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = deliver(pipe.WebhookURL(), ns, []byte("{not json"), webhookSecret, "push")
	Expect(code).To(Equal(http.StatusBadRequest))
	code, resp := deliver(pipe.WebhookURL(), ns, body, webhookSecret, "ping")
	Expect(code).To(Equal(http.StatusOK))
	Expect(resp).To(HaveKeyWithValue("status", "ignored"))
	other := r.pushPayload(sha, []string{"elsewhere/x.yaml"})
	code, resp = deliver(pipe.WebhookURL(), ns, other, webhookSecret, "push")
	Expect(code).To(Equal(http.StatusOK))
	Expect(resp).To(HaveKeyWithValue("reason", "no source target matches"))

	// Nothing was applied and the source target was never leased.
	Consistently(func(g Gomega) {
		_, err := getCM(ctx, ns, "a")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, 2*time.Second).Should(Succeed())
	Expect(mustCM(ctx, ns, "web").Annotations).NotTo(HaveKey(pipeline.AnnotationEventID))
}

// holdNext makes the next processor of namespace ns block before streaming until release is closed; entered
// receives its lease ID.
func holdNext(ns string) (entered chan string, release chan struct{}) {
	entered, release = make(chan string, 1), make(chan struct{})
	var taken bool
	f := func(t sourceTargetT, lease string) {
		if t.Namespace != ns || taken {
			return
		}
		taken = true
		entered <- lease
		<-release
	}
	hookFunc.Store(&f)
	return entered, release
}

func TestRacingPushesNewerLeaseWins(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	entered, release := holdNext(ns)
	defer hookFunc.Store(nil)

	sha1, changed1 := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "old")})
	older := accepted(t, ns, r.pushPayload(sha1, changed1))
	Eventually(entered).Should(Receive())
	sha2, changed2 := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "new")})
	newer := accepted(t, ns, r.pushPayload(sha2, changed2))
	Expect(waitEvent(t, newer).Status.Code).NotTo(Equal(codes.Error))
	close(release)
	root := waitEvent(t, older)
	Expect(root.Status.Code).NotTo(Equal(codes.Error), "an abandoned processor is not a failure")
	st := named(traceSpans(older), "source_target")
	Expect(st).To(HaveLen(1))
	Expect(st[0].Attributes).To(ContainElement(HaveField("Key", BeEquivalentTo("abandoned"))))
	Expect(named(traceSpans(older), "renderer")).To(BeEmpty(), "stale data never reaches the renderer")
	a := mustCM(ctx, ns, "a")
	Expect(a.Data).To(HaveKeyWithValue("value", "new"))
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha2))

	// The provisioner and pruner re-check the lease themselves: a stale lease ID in the baggage writes nothing.
	conn, err := stage.Dial(pipe.Stages[runner.Provisioner].GRPCAddr)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	pctx, err := pipeline.WithContext(ctx, pipeline.Context{Tenant: "t", Namespace: ns, SourceTarget: "web",
		Commit: sha1, LeaseID: "0123456789abcdef"})
	Expect(err).NotTo(HaveOccurred())
	m, err := pipeline.Encode(mustUnstructured(configMapYAML("stale", "", "x")))
	Expect(err).NotTo(HaveOccurred())
	_, err = stage.Forward(pctx, katastromav1.NewProvisionerServiceClient(conn).Provision, []*katastromav1.Manifest{m})
	Expect(status.Code(err)).To(Equal(grpccodes.Aborted), "%v", err)
	pconn, err := stage.Dial(pipe.Stages[runner.Pruner].GRPCAddr)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = pconn.Close() }()
	_, err = stage.Forward(pctx, katastromav1.NewPrunerServiceClient(pconn).Prune,
		[]*katastromav1.ObjectRef{{ApiVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "other"}})
	Expect(status.Code(err)).To(Equal(grpccodes.Aborted), "%v", err)
	mustCM(ctx, ns, "a")
	_, err = getCM(ctx, ns, "stale")
	Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

func mustUnstructured(y *string) *unstructured.Unstructured {
	objs, err := pipeline.SplitYAML([]byte(*y))
	Expect(err).NotTo(HaveOccurred())
	return objs[0]
}
