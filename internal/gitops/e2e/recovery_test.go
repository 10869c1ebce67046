package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pharos"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
)

const (
	// gateLabel on a namespace sends its ConfigMap creations through the admission gate.
	gateLabel = "e2e.katastroma.org/admission-gate"
	// flakyName is refused on its first create per namespace, doomedName always.
	flakyName, doomedName = "flaky", "doomed"
	// leaseRefusedName is refused on its first update per namespace (a source target's first lease).
	leaseRefusedName = "lease-refused"
	// Crash detection must wait for the crashed processor's lease to go stale, or its replay is refused.
	leaseStaleAfter = 8 * time.Second
	crashTimeout    = 12 * time.Second
)

// admissionGate is a validating webhook the API server calls for ConfigMap creations and updates in gated
// namespaces. The
// provisioner dry-runs a commit before writing it, so a dry run is judged like the create it announces.
type admissionGate struct {
	mu      sync.Mutex
	denied  map[string]int // namespace/name → refused creates, dry runs included
	created map[string]int // namespace/name → creates that were not dry runs, allowed or not
	updates map[string]int // namespace/name → refused updates
}

func (a *admissionGate) Handle(_ context.Context, req admission.Request) admission.Response {
	key := req.Namespace + "/" + req.Name
	a.mu.Lock()
	defer a.mu.Unlock()
	if req.Operation == admissionv1.Update && req.Name == leaseRefusedName && a.updates[key] == 0 {
		a.updates[key]++
		return admission.Denied(fmt.Sprintf("e2e admission gate refuses the first update of %s", key))
	}
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	if req.DryRun == nil || !*req.DryRun {
		a.created[key]++
	}
	if (req.Name != flakyName && req.Name != doomedName) || (req.Name == flakyName && a.denied[key] > 0) {
		return admission.Allowed("")
	}
	a.denied[key]++
	return admission.Denied(fmt.Sprintf("e2e admission gate refuses %s", key))
}

func (a *admissionGate) count(ns, name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.denied[ns+"/"+name]
}

// writes is how many creates of ns/name reached the gate for real (not as a dry run).
func (a *admissionGate) writes(ns, name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.created[ns+"/"+name]
}

// serveAdmissionGate serves the gate with the test environment's serving certificate and registers it with the
// API server, which then calls it for every matching request: the provisioner's applies go through it.
func serveAdmissionGate(t *testing.T) *admissionGate {
	t.Helper()
	serving := env.WebhookServing()
	port, err := freePort()
	Expect(err).NotTo(HaveOccurred())
	srv := webhook.NewServer(webhook.Options{Host: serving.LocalServingHost, Port: port, CertDir: serving.LocalServingCertDir})
	gate := &admissionGate{denied: map[string]int{}, created: map[string]int{}, updates: map[string]int{}}
	srv.Register("/gate", &admission.Webhook{Handler: gate})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	Eventually(func() error { return srv.StartedChecker()(&http.Request{}) }).Should(Succeed())

	url := fmt.Sprintf("https://%s/gate", net.JoinHostPort(serving.LocalServingHost, strconv.Itoa(port)))
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "katastroma-e2e-gate-" + rand.String(5)},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "gate.e2e.katastroma.org",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: serving.LocalServingCAData},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create,
					admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"configmaps"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{gateLabel: "on"}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), cfg)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server stopped with an error: %v", err)
		}
	})
	// The API server picks the configuration up asynchronously: wait until a dry run is refused.
	probe := gatedNamespace(ctx, "gate-probe-"+rand.String(5))
	Eventually(func(g Gomega) {
		err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probe, Name: doomedName}},
			client.DryRunAll)
		g.Expect(err).To(MatchError(ContainSubstring("e2e admission gate refuses")))
	}).Should(Succeed())
	return gate
}

// gatedNamespace labels ns for the gate, creating it when it does not exist.
func gatedNamespace(ctx context.Context, ns string) string {
	n := &corev1.Namespace{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: ns}, n); apierrors.IsNotFound(err) {
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{gateLabel: "on"}}})).To(Succeed())
		return ns
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[gateLabel] = "on"
	Expect(env.Client.Patch(ctx, n, patch)).To(Succeed())
	return ns
}

// pharosEvent reads one event from pharos's state ConfigMap: what an operator sees with kubectl.
func pharosEvent(g Gomega, key types.NamespacedName, id string) pharos.Event {
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), key, cm)).To(Succeed())
	var events []pharos.Event
	g.Expect(json.Unmarshal([]byte(cm.Data[pharos.ConfigMapKey]), &events)).To(Succeed())
	var e pharos.Event
	g.Expect(events).To(ContainElement(HaveField("ID", id), &e), "pharos tracks event %s", id)
	return e
}

// TestFailureRecovery runs every stage and pharos as separate processes; the stages' OTel SDK exporters send their
// spans over OTLP/gRPC to a collector that forwards them to pharos, which replays through the source handler.
func TestFailureRecovery(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	gate := serveAdmissionGate(t)
	state := types.NamespacedName{Namespace: "default", Name: "pharos-e2e-" + rand.String(5)}
	st := startStack(t, stackOptions{pharos: true, args: map[string][]string{
		runner.Source: {"--lease-stale-after", leaseStaleAfter.String(), "--max-replay-attempts", "3"},
		pharosName: {"--state-configmap", state.String(), "--crash-timeout", crashTimeout.String(),
			"--replay-limit", "2", "--replay-backoff", "500ms", "--replay-backoff-max", "1s"},
	}})
	push := func(ns string, r *repo, sha string, changed []string) string {
		code, resp := deliver(st.webhookURL, ns, r.pushPayload(sha, changed), webhookSecret, "push")
		Expect(code).To(Equal(http.StatusAccepted), "%v", resp)
		return resp["event_id"].(string)
	}

	// 1. The first apply is refused by admission; pharos sees the ERROR span and replays; the replay converges.
	ns := gatedNamespace(ctx, newTenant(ctx))
	r := gitd.newRepo(t)
	sha, changed := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1"),
		"deploy/flaky.yaml": configMapYAML(flakyName, "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	event := push(ns, r, sha, changed)
	Eventually(func(g Gomega) {
		e := pharosEvent(g, state, event)
		g.Expect(e.State).To(Equal(pharos.Done), "reason %q", e.Reason)
		g.Expect(e.Replays).To(Equal(1))
		g.Expect(e.Trace).NotTo(Equal(event), "the replay is a new trace")
	}).Should(Succeed())
	Expect(gate.count(ns, flakyName)).To(Equal(1))
	Eventually(func() bool {
		for _, sp := range st.col.trace(event) {
			if sp.name == "provisioner" && sp.errored {
				return true
			}
		}
		return false
	}).Should(BeTrue(), "the provisioner's ERROR span of the first attempt")
	Expect(mustCM(ctx, ns, flakyName).Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
	tcm := mustCM(ctx, ns, "web")
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "succeeded"))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationReplayCount, "1"))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventID, event))
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a", "ConfigMap/"+flakyName))

	// 2. A target admission always refuses: two replays (the limit), then pharos gives up with a visible reason.
	ns = gatedNamespace(ctx, newTenant(ctx))
	r = gitd.newRepo(t)
	sha, changed = r.commit(map[string]*string{"deploy/doomed.yaml": configMapYAML(doomedName, "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	event = push(ns, r, sha, changed)
	Eventually(func(g Gomega) {
		e := pharosEvent(g, state, event)
		g.Expect(e.State).To(Equal(pharos.GaveUp))
		g.Expect(e.Replays).To(Equal(2))
		g.Expect(e.Reason).To(ContainSubstring("replay limit 2 reached; last failure:"))
		g.Expect(e.Reason).To(ContainSubstring("e2e admission gate refuses " + ns + "/" + doomedName))
	}).Should(Succeed())
	Expect(gate.count(ns, doomedName)).To(Equal(3), "the first attempt and two replays")
	Consistently(func() int { return gate.count(ns, doomedName) }, 3*time.Second).Should(Equal(3),
		"no replay after giving up")
	tcm = mustCM(ctx, ns, "web")
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "failed"))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationReplayCount, "2"))

	// 3. The source handler is killed mid-event (the renderer it streams to is stopped, then killed too): no span
	// says the event failed, only `event.started` says it began. After the crash timeout pharos replays it.
	ns = newTenant(ctx)
	r = gitd.newRepo(t)
	sha, changed = r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "crash")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	st.signal(runner.Renderer, syscall.SIGSTOP)
	event = push(ns, r, sha, changed)
	var started pharos.Event
	Eventually(func(g Gomega) {
		started = pharosEvent(g, state, event)
		g.Expect(started.State).To(Equal(pharos.Running))
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(mustCM(ctx, ns, "web").Annotations).To(HaveKeyWithValue(pipeline.AnnotationLeaseID, Not(BeEmpty())))
	}).Should(Succeed())
	st.kill(runner.Source)
	st.kill(runner.Renderer)
	st.start(runner.Renderer)
	st.start(runner.Source)
	st.waitServing(runner.Renderer)
	st.waitServing(runner.Source)
	Eventually(func(g Gomega) {
		e := pharosEvent(g, state, event)
		g.Expect(e.State).To(Equal(pharos.Done), "reason %q", e.Reason)
		g.Expect(e.Replays).To(Equal(1))
		g.Expect(e.LastReplay.Sub(started.Since)).To(BeNumerically(">=", crashTimeout),
			"the replay waited for the crash timeout")
	}).Should(Succeed())
	a := mustCM(ctx, ns, "a")
	Expect(a.Data).To(HaveKeyWithValue("value", "crash"))
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
	tcm = mustCM(ctx, ns, "web")
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "succeeded"))
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationReplayCount, "1"))
	Expect(tcm.Annotations).NotTo(HaveKey(pipeline.AnnotationLeaseID), "the replay released the lease")
}
