package agentrax_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// env is the control plane shared by every test in this package, with both agentrax controllers running and the
// webhooks served through the API server.
var env *testenv.Env

// registrar records what the AgentDeployment controller asks of the MCP registry.
var registrar = &recordingRegistrar{}

func TestMain(m *testing.M) {
	// Each manager's real registrar (the MCP registry) is wrapped by the recorder; namespaces opted in with
	// useRealRegistry go through to it, the others get the recorder's answers.
	operator.WrapAgentRegistrar = func(real agentrax.Registrar) agentrax.Registrar {
		return &recorded{recordingRegistrar: registrar, real: real}
	}
	agentrax.DefaultSettleGrace = 2 * time.Second
	// No container runs in the simulated pods: the agents' MCP servers and Prometheus listen on loopback, each on
	// the port its in-cluster address names.
	_ = os.Setenv("QUARTET_DEV_DIAL_MAP", "*.svc:*=127.0.0.1")
	code := testenv.Main(m, &env, testenv.Options{
		Controllers: []string{agentrax.AgentDeploymentControllerName, agentrax.TenantQuotaControllerName},
		// Cluster mode: agent Deployments become Available through the Deployment controller and the simulated
		// kubelet, the HPA controller takes the autoscalers and the garbage collector deletes children.
		// CrashLoopStage lets a test crash a running canary's pods by labelling them.
		Cluster: &testenv.ClusterOptions{ExtraStages: []byte(testenv.CrashLoopStage)},
		Manager: func(o *manager.Options) {
			canaryManagerOptions(o)
			registryOptions(&leaderURL)(o)
		},
	})
	stopLab()
	os.Exit(code)
}

// deregistration is what the registrar saw when it was asked to deregister an agent.
type deregistration struct {
	Name              string
	FinalizerPresent  bool
	ServiceExisted    bool
	DeploymentExisted bool
	DeletionTimestamp bool
}

type recordingRegistrar struct {
	mu             sync.Mutex
	registered     map[string]int
	deregistered   []deregistration
	failDeregister atomic.Bool
	// realNamespaces are the namespaces whose agents go through to the real registry.
	realNamespaces sync.Map
}

// useRealRegistry sends the agents of ns to the manager's real MCP registry.
func useRealRegistry(ns string) { registrar.realNamespaces.Store(ns, true) }

// recorded is the Registrar one manager gets: the shared recorder in front of that manager's real one.
type recorded struct {
	*recordingRegistrar
	real agentrax.Registrar
}

func (r *recorded) isReal(ad *agentraxv1alpha1.AgentDeployment) bool {
	_, ok := r.realNamespaces.Load(ad.Namespace)
	return ok
}

func (r *recorded) Register(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (bool, error) {
	r.mu.Lock()
	if r.registered == nil {
		r.registered = map[string]int{}
	}
	r.registered[ad.Namespace+"/"+ad.Name]++
	r.mu.Unlock()
	if r.isReal(ad) {
		return r.real.Register(ctx, ad)
	}
	return true, nil
}

// HeartbeatInterval is the real registrar's: the reconciler requeues exposed agents for their heartbeats.
func (r *recorded) HeartbeatInterval() time.Duration {
	if h, ok := r.real.(agentrax.HeartbeatIntervaler); ok {
		return h.HeartbeatInterval()
	}
	return 0
}

// SetWake forwards the controller's wake-up function to the real registrar (it probes off the reconcile workers).
func (r *recorded) SetWake(wake func(registry.Key)) {
	if w, ok := r.real.(agentrax.Waker); ok {
		w.SetWake(wake)
	}
}

// Deregister looks at the API server, uncached, to record what still existed at that moment.
func (r *recorded) Deregister(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	if r.failDeregister.Load() {
		return fmt.Errorf("registry unavailable")
	}
	if err := r.recordDeregistration(ctx, ad); err != nil || !r.isReal(ad) {
		return err
	}
	return r.real.Deregister(ctx, ad)
}

func (r *recordingRegistrar) recordDeregistration(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	key := client.ObjectKeyFromObject(ad)
	d := deregistration{Name: ad.Namespace + "/" + ad.Name}
	stored := &agentraxv1alpha1.AgentDeployment{}
	if err := env.Client.Get(ctx, key, stored); err == nil {
		d.FinalizerPresent = controllerutil.ContainsFinalizer(stored, agentraxv1alpha1.Finalizer)
		d.DeletionTimestamp = stored.DeletionTimestamp != nil
	}
	d.ServiceExisted = env.Client.Get(ctx, key, &corev1.Service{}) == nil
	d.DeploymentExisted = env.Client.Get(ctx, key, &appsv1.Deployment{}) == nil
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deregistered = append(r.deregistered, d)
	return nil
}

func (r *recordingRegistrar) deregistrations(name string) []deregistration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []deregistration
	for _, d := range r.deregistered {
		if d.Name == name {
			out = append(out, d)
		}
	}
	return out
}

var namespaceCounter atomic.Int32

// newNamespace creates a namespace of the test's own, so tests never see each other's objects.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agentrax-%d", namespaceCounter.Add(1))}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func tenantQuota(ns, name string, agents int32, gpus int64, total, perAgent int32) *agentraxv1alpha1.TenantQuota {
	return &agentraxv1alpha1.TenantQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentraxv1alpha1.TenantQuotaSpec{MaxAgents: agents, MaxGPUs: gpus, MaxTotalReplicas: total, MaxReplicasPerAgent: perAgent},
	}
}

// agentDeployment is a Recreate agent with replicas min..max and gpus GPUs a pod (none when 0).
func agentDeployment(ns, name, quota string, minR, maxR int32, gpus int64) *agentraxv1alpha1.AgentDeployment {
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{
			Image: "ghcr.io/org/agent:v1", TenantRef: quota,
			Replicas: agentraxv1alpha1.ReplicasSpec{Min: minR, Max: maxR, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			Env:      []corev1.EnvVar{{Name: "MODEL_NAME", Value: "gpt-4"}},
			Args:     []string{"--serve"},
		},
	}
	if gpus > 0 {
		ad.Spec.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return ad
}

// readFixture decodes a YAML file of testdata as it is, into the namespace ns.
func readFixture(t *testing.T, file, ns string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	NewWithT(t).Expect(yaml.Unmarshal(data, &u.Object)).To(Succeed())
	u.SetNamespace(ns)
	return u
}

func getQuota(g Gomega, ns, name string) *agentraxv1alpha1.TenantQuota {
	tq := &agentraxv1alpha1.TenantQuota{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tq)).To(Succeed())
	return tq
}

// getLedger returns the decoded admission ledger of the TenantQuota "q" every test in this package uses.
func getLedger(g Gomega, ns string) []agentraxv1alpha1.Reservation {
	ledger, err := quota.ParseLedger(getQuota(g, ns, "q").Status.Ledger)
	g.Expect(err).NotTo(HaveOccurred())
	return ledger
}

var _ = ptr.To[int32]
