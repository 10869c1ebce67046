package e2e

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
)

// TestSeparateProcesses runs every stage as its own katastroma process talking over loopback gRPC, exporting
// spans over OTLP to an in-test collector, and drives a push that applies and one that prunes.
func TestSeparateProcesses(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	st := startStack(t, stackOptions{})
	col, webhookURL := st.col, st.webhookURL

	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha1, changed := r.commit(map[string]*string{
		"deploy/a.yaml": configMapYAML("a", "", "1"), "deploy/b.yaml": configMapYAML("b", "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	push := func(sha string, changed []string) string {
		code, resp := deliver(webhookURL, ns, r.pushPayload(sha, changed), webhookSecret, "push")
		Expect(code).To(Equal(http.StatusAccepted), "%v", resp)
		id := resp["event_id"].(string)
		Eventually(func(g Gomega) {
			tcm := mustCM(ctx, ns, "web")
			g.Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventID, id))
			g.Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "succeeded"))
		}).Should(Succeed())
		return id
	}

	first := push(sha1, changed)
	a := mustCM(ctx, ns, "a")
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha1))
	Expect(a.ManagedFields).To(ContainElement(HaveField("Manager", pipeline.FieldManager)))
	mustCM(ctx, ns, "b")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a", "ConfigMap/b"))

	sha2, changed := r.commit(map[string]*string{"deploy/b.yaml": nil})
	second := push(sha2, changed)
	_, err := getCM(ctx, ns, "b")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the removed manifest is pruned")
	Expect(mustCM(ctx, ns, "a").ResourceVersion).To(Equal(a.ResourceVersion), "an unchanged manifest is not rewritten")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a"))

	// One trace per event, crossing every process: each stage span comes from its own process.
	wantSpans := map[string]int{"event": 1, "source_target": 1, "renderer": 1, "orderer": 2, "labeler": 1,
		"provisioner": 1, "pruner": 1}
	for _, id := range []string{first, second} {
		Eventually(func(g Gomega) {
			got := map[string]int{}
			for _, s := range col.trace(id) {
				if _, ok := wantSpans[s.name]; !ok {
					continue // otelgrpc client/server spans
				}
				g.Expect(s.errored).To(BeFalse(), "span %s", s.name)
				want := "katastroma-" + s.name
				if s.name == "event" || s.name == "source_target" {
					want = "katastroma-" + runner.Source
				}
				g.Expect(s.service).To(Equal(want), "span %s", s.name)
				got[s.name]++
			}
			g.Expect(got).To(Equal(wantSpans))
		}).Should(Succeed(), "trace of event %s", id)
	}
	Expect(col.stageTraces()).To(Equal(2), "no stage span outside the two events' traces")

	// SIGTERM drains and stops every process cleanly.
	st.stopAll()
	for _, name := range runner.Stages {
		out, _ := os.ReadFile(st.proc(name).log)
		Expect(strings.Contains(string(out), "stage running")).To(BeTrue(), "katastroma %s logged its start", name)
	}
}
