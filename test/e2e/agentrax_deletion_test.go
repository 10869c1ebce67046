package e2e_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	agentraxcontrollers "github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// registryGate sits in front of the manager's real MCP registrar: while a namespace is held its agents cannot be
// deregistered (as when the registry is unreachable), and every deregistration that goes through records whether
// the agent's Service still existed at that moment, read from the API server itself.
type registryGate struct {
	real agentraxcontrollers.Registrar

	mu       sync.Mutex
	held     map[string]bool   // namespace → deregistration refused
	services map[string][]bool // namespace/name → Service existed, one entry per deregistration that went through
}

var gate = &registryGate{held: map[string]bool{}, services: map[string][]bool{}}

// wrap is installed as operator.WrapAgentRegistrar before the suite's manager starts.
func (r *registryGate) wrap(real agentraxcontrollers.Registrar) agentraxcontrollers.Registrar {
	r.real = real
	return r
}

func (r *registryGate) hold(ns string, held bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[ns] = held
}

func (r *registryGate) Register(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	return r.real.Register(ctx, ad)
}

// HeartbeatInterval is the real registrar's, so the reconciler keeps requeueing exposed agents as it would.
func (r *registryGate) HeartbeatInterval() time.Duration {
	if h, ok := r.real.(agentraxcontrollers.HeartbeatIntervaler); ok {
		return h.HeartbeatInterval()
	}
	return 0
}

// SetWake forwards the controller's wake-up function to the real registrar (it probes off the reconcile workers).
func (r *registryGate) SetWake(wake func(registry.Key)) {
	if w, ok := r.real.(agentraxcontrollers.Waker); ok {
		w.SetWake(wake)
	}
}

func (r *registryGate) Deregister(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	r.mu.Lock()
	held := r.held[ad.Namespace]
	r.mu.Unlock()
	if held {
		return errors.New("registry unavailable (held by the test)")
	}
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(ad), &corev1.Service{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.mu.Lock()
	key := ad.Namespace + "/" + ad.Name
	r.services[key] = append(r.services[key], err == nil)
	r.mu.Unlock()
	return r.real.Deregister(ctx, ad)
}

func (r *registryGate) serviceExistedAtDeregistration(ns, name string) []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.services[ns+"/"+name]...)
}

// Deleting an agent deregisters it while its Service still exists and its pods still run (the stable Deployment
// is no garbage-collector dependent: the operator deletes it after the deregistration), under background and
// foreground propagation:
// here the real garbage collector deletes the children. Under Foreground it does so at once, while the agent
// waits for its own finalizer, so only a finalizer the operator holds on the Service keeps the agent reachable
// until its registry entry is gone — that case fails without it. Under Background the collector leaves the
// children alone while the agent exists; that case checks the order holds there too. While the registry refuses,
// the agent and its Service stay; once it answers, the deregistration sees the Service, then both go.
func TestAgentIsDeregisteredBeforeItsServiceGoes(t *testing.T) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationBackground} {
		t.Run(string(policy), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := namespace(t)
			createQuota(g, ns, agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxTotalReplicas: 20, MaxReplicasPerAgent: 10})
			ad := &agentraxv1alpha1.AgentDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaving"},
				Spec: agentraxv1alpha1.AgentDeploymentSpec{
					Image: "ghcr.io/org/agent:v1", TenantRef: "quota", Port: 8080,
					Replicas: agentraxv1alpha1.ReplicasSpec{Min: 1, Max: 2, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
				},
			}
			g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
			key := client.ObjectKeyFromObject(ad)
			g.Eventually(func(g Gomega) {
				got := &agentraxv1alpha1.AgentDeployment{}
				g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
				g.Expect(got.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
				g.Expect(controllerutil.ContainsFinalizer(got, agentraxv1alpha1.Finalizer)).To(BeTrue())
			}).WithTimeout(2 * time.Minute).Should(Succeed())

			gate.hold(ns, true)
			t.Cleanup(func() { gate.hold(ns, false) })
			g.Expect(env.Client.Delete(ctx, ad, client.PropagationPolicy(policy))).To(Succeed())
			// Long enough for the garbage collector to act on the deletion (its foreground pass deletes the
			// children within a second or two when nothing holds them).
			g.Consistently(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, key, &agentraxv1alpha1.AgentDeployment{})).To(Succeed())
				svc := &corev1.Service{}
				g.Expect(env.Client.Get(ctx, key, svc)).To(Succeed(), "the Service outlives the registry entry")
				// And so do the backends behind it: the Deployment and its running pods.
				dep := &appsv1.Deployment{}
				g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed(), "the Deployment outlives the registry entry")
				g.Expect(dep.DeletionTimestamp).To(BeNil(), "the Deployment is not being deleted")
				g.Expect(dep.Status.AvailableReplicas).To(BeNumerically(">=", 1), "the agent's pods still serve")
				pods := &corev1.PodList{}
				g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns),
					client.MatchingLabels{agentraxv1alpha1.LabelName: "leaving"})).To(Succeed())
				g.Expect(pods.Items).To(ContainElement(HaveField("DeletionTimestamp", BeNil())), "a pod still runs")
			}, 5*time.Second, 200*time.Millisecond).Should(Succeed())

			gate.hold(ns, false)
			g.Eventually(func(g Gomega) {
				err := env.Client.Get(ctx, key, &corev1.Service{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Service: %v", err)
				err = env.Client.Get(ctx, key, &agentraxv1alpha1.AgentDeployment{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "agent: %v", err)
				err = env.Client.Get(ctx, key, &appsv1.Deployment{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Deployment deleted after deregistration: %v", err)
			}).WithTimeout(2 * time.Minute).Should(Succeed())
			// A reconcile from a cache that has not yet seen the finalizer go may deregister once more (idempotent);
			// the first deregistration is the one that counts.
			existed := gate.serviceExistedAtDeregistration(ns, "leaving")
			g.Expect(existed).NotTo(BeEmpty())
			g.Expect(existed[0]).To(BeTrue(), "deregistered while the Service still existed")
		})
	}
}
