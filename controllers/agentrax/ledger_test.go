package agentrax_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// TestLedgerHandEdits: the API server refuses a status.ledger that is not in the ledger format; one that passes
// the schema but cannot be read (a name reserved twice) makes admission refuse until the TenantQuota controller
// has rebuilt the ledger from the live agents, after which admission resumes and the ledger is exact again.
func TestLedgerHandEdits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 100, 20, 10))).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "a", "q", 1, 4, 1))).To(Succeed())

	edit := func(ledger string) error {
		tq := getQuota(g, ns, "q")
		before := tq.DeepCopy()
		tq.Status.Ledger = ledger
		return env.Client.Status().Patch(ctx, tq, client.MergeFrom(before))
	}
	err := edit("a: 4 replicas")
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("status.ledger"))

	g.Eventually(func() error { return edit("a=1/0@1,a=9/0@1") }).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ledger := getLedger(g, ns)
		g.Expect(ledger).To(HaveLen(1))
		g.Expect(ledger[0]).To(And(
			HaveField("Name", "a"), HaveField("Replicas", int32(4)), HaveField("GPUs", int64(4))))
	}).Should(Succeed(), "the controller rebuilt the ledger from agent a")

	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "b", "q", 1, 4, 1))).To(Succeed())
	// Admission answers only once the write that records b was accepted, so the ledger holds b already.
	g.Expect(getLedger(g, ns)).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "b")))
	err = env.Client.Create(ctx, agentDeployment(ns, "c", "q", 1, 10, 10))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "8 + 100 GPUs > 100: %v", err)
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Regarding.Name", "q"), HaveField("Reason", agentraxv1alpha1.ReasonLedgerRebuilt),
			HaveField("Note", ContainSubstring(`"a" is reserved twice`)))))
	}).Should(Succeed())
}

// TestUnbuiltLedgerFailsClosed: a TenantQuota as an earlier operator version left it (usage counted, no ledger,
// no LedgerReady condition) must not admit against its empty ledger. An agent created right then is refused
// by the quota the live agents already use up (admission answers 429 until the controller has rebuilt the
// ledger; the client retries), and the controller rebuilds the ledger from the live agents.
func TestUnbuiltLedgerFailsClosed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 2, 100, 20, 10))).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "a", "q", 1, 4, 1))).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "b", "q", 1, 4, 1))).To(Succeed())
	g.Eventually(func(g Gomega) {
		tq := getQuota(g, ns, "q")
		g.Expect(tq.Status.UsedAgents).To(Equal(int32(2)))
		g.Expect(meta.IsStatusConditionTrue(tq.Status.Conditions, agentraxv1alpha1.ConditionLedgerReady)).To(BeTrue())
	}).Should(Succeed())

	tq := getQuota(g, ns, "q")
	before := tq.DeepCopy()
	tq.Status.Ledger = ""
	meta.RemoveStatusCondition(&tq.Status.Conditions, agentraxv1alpha1.ConditionLedgerReady)
	g.Expect(env.Client.Status().Patch(ctx, tq, client.MergeFrom(before))).To(Succeed())

	err := env.Client.Create(ctx, agentDeployment(ns, "c", "q", 1, 1, 0))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a and b use maxAgents 2 up, whatever the ledger says: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("maxAgents"))
	g.Eventually(func(g Gomega) {
		tq := getQuota(g, ns, "q")
		g.Expect(meta.IsStatusConditionTrue(tq.Status.Conditions, agentraxv1alpha1.ConditionLedgerReady)).To(BeTrue())
		g.Expect(getLedger(g, ns)).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "b")))
	}).Should(Succeed())
}
