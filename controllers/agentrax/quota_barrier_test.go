package agentrax_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	agentraxwebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/agentrax"
)

const (
	shardLabel       = "agentrax.io/test-shard"
	validatingHook   = "vagentdeployment-v1alpha1.agentrax.io"
	secondConfigName = "agentrax-second-webhook-server"
)

// countingHandler counts the admission requests a webhook server answers.
type countingHandler struct {
	next  http.Handler
	count atomic.Int64
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.count.Add(1)
	h.next.ServeHTTP(w, r)
}

// startSecondWebhookServer runs a second manager whose own webhook server serves the AgentDeployment validating
// webhook (same code, its own clients), and routes admission of objects labelled shard=b to it: the validating
// entry installed by the test environment gets an objectSelector excluding shard b, and a second
// ValidatingWebhookConfiguration sends shard b to the second server. Each request is validated by exactly one
// of the two servers, like two webhook replicas behind a Service.
func startSecondWebhookServer(t *testing.T) *countingHandler {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	serving := env.WebhookServing()
	port := freePort(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 operator.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: serving.LocalServingHost, Port: port, CertDir: serving.LocalServingCertDir}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	validator := agentraxwebhooks.Validator{Quota: &agentraxwebhooks.QuotaAdmission{
		Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), GPUResource: quota.DefaultGPUResourceName}}
	second := &countingHandler{next: admission.WithValidator[*agentraxv1alpha1.AgentDeployment](mgr.GetScheme(), validator)}
	mgr.GetWebhookServer().Register("/validate-agentrax-io-v1alpha1-agentdeployment", second)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	g.Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).Should(Succeed())

	// Route shard b to the second server.
	configs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(env.Client.List(ctx, configs)).To(Succeed())
	var installed *admissionregistrationv1.ValidatingWebhookConfiguration
	var entry admissionregistrationv1.ValidatingWebhook
	for i := range configs.Items {
		for j, w := range configs.Items[i].Webhooks {
			if w.Name == validatingHook {
				installed = &configs.Items[i]
				configs.Items[i].Webhooks[j].ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: shardLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}
				entry = *configs.Items[i].Webhooks[j].DeepCopy()
			}
		}
	}
	g.Expect(installed).NotTo(BeNil(), "the test environment installs the validating webhook")
	original := installed.DeepCopy()
	g.Expect(env.Client.Update(ctx, installed)).To(Succeed())
	entry.Name = "vagentdeployment-second.agentrax.io"
	url := fmt.Sprintf("https://%s/validate-agentrax-io-v1alpha1-agentdeployment",
		net.JoinHostPort(serving.LocalServingHost, strconv.Itoa(port)))
	entry.ClientConfig.URL = &url
	entry.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{shardLabel: "b"}}
	secondConfig := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: secondConfigName},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{entry},
	}
	g.Expect(env.Client.Create(ctx, secondConfig)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), secondConfig)
		current := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if env.Client.Get(context.Background(), client.ObjectKeyFromObject(original), current) == nil {
			current.Webhooks = original.Webhooks
			for i := range current.Webhooks {
				if current.Webhooks[i].Name == validatingHook {
					current.Webhooks[i].ObjectSelector = &metav1.LabelSelector{}
				}
			}
			_ = env.Client.Update(context.Background(), current)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second manager: %v", err)
		}
	})

	// Wait until the API server routes shard b to the second server: a dry run there is answered by it.
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "probe", 1, 0, 1, 1))).To(Succeed())
	g.Eventually(func(g Gomega) {
		before := second.count.Load()
		ad := agentDeployment(ns, "probe", "probe", 1, 1, 0)
		ad.Labels = map[string]string{shardLabel: "b"}
		g.Expect(env.Client.Create(ctx, ad, client.DryRunAll)).To(Succeed())
		g.Expect(second.count.Load()).To(BeNumerically(">", before))
	}).Should(Succeed())
	return second
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestQuotaBarrierAcrossTwoWebhookServers: 50 concurrent near-limit creates, half admitted by each of two
// independent webhook servers, never exceed any ceiling of the quota; 20 rounds with random demands.
func TestQuotaBarrierAcrossTwoWebhookServers(t *testing.T) {
	second := startSecondWebhookServer(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	const rounds, creates = 20, 50
	startSecond := second.count.Load()
	var totalAdmitted, totalRefused int
	for round := range rounds {
		g := NewWithT(t)
		ns := newNamespace(t)
		spec := agentraxv1alpha1.TenantQuotaSpec{
			MaxAgents: int32(8 + rng.IntN(20)), MaxGPUs: int64(10 + rng.IntN(30)),
			MaxTotalReplicas: int32(15 + rng.IntN(40)), MaxReplicasPerAgent: 4,
		}
		tq := tenantQuota(ns, "q", spec.MaxAgents, spec.MaxGPUs, spec.MaxTotalReplicas, spec.MaxReplicasPerAgent)
		g.Expect(env.Client.Create(ctx, tq)).To(Succeed())

		type outcome struct {
			demand quota.Demand
			err    error
		}
		results := make([]outcome, creates)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range creates {
			ad := agentDeployment(ns, fmt.Sprintf("a%02d", i), "q", 1, int32(1+rng.IntN(4)), int64(rng.IntN(3)))
			ad.Labels = map[string]string{shardLabel: []string{"a", "b"}[i%2]}
			results[i].demand = quota.DemandOf(ad, quota.DefaultGPUResourceName)
			wg.Go(func() {
				<-start
				results[i].err = env.Client.Create(ctx, ad)
			})
		}
		close(start)
		wg.Wait()

		var admitted quota.Usage
		refused := 0
		for _, r := range results {
			switch {
			case r.err == nil:
				admitted = admitted.Add(r.demand)
			case apierrors.IsForbidden(r.err):
				refused++
			default:
				t.Fatalf("round %d: unexpected error %v", round, r.err)
			}
		}
		g.Expect(admitted.Agents).To(BeNumerically("<=", spec.MaxAgents), "round %d agents", round)
		g.Expect(admitted.GPUs).To(BeNumerically("<=", spec.MaxGPUs), "round %d GPUs", round)
		g.Expect(admitted.Replicas).To(BeNumerically("<=", spec.MaxTotalReplicas), "round %d replicas", round)
		g.Expect(refused).To(BeNumerically(">", 0), "round %d is near the limit", round)

		// What is stored agrees with what was admitted, and so does the ledger.
		stored := &agentraxv1alpha1.AgentDeploymentList{}
		g.Expect(env.Client.List(ctx, stored, client.InNamespace(ns))).To(Succeed())
		g.Expect(stored.Items).To(HaveLen(int(admitted.Agents)))
		ledger := quota.LedgerUsage(getLedger(g, ns), "")
		g.Expect(ledger).To(Equal(admitted))
		totalAdmitted += int(admitted.Agents)
		totalRefused += refused
	}
	t.Logf("%d rounds: %d admitted, %d refused; the second webhook server answered %d requests",
		rounds, totalAdmitted, totalRefused, second.count.Load()-startSecond)
	NewWithT(t).Expect(second.count.Load() - startSecond).To(BeNumerically(">=", rounds*creates/2))
}
