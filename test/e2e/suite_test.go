// Package e2e runs the operator with every controller against the cluster-grade control plane (kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok's simulated nodes), one cluster for the whole suite, and checks
// what only Kubernetes' own controllers can show: garbage collection and cascading deletion, workloads that become
// Available through the simulated kubelet, the HPA controller taking the autoscalers the operator writes, and Pod
// Security admitting every pod template the operator writes.
package e2e_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// Deregistrations go through a gate the deletion test can close (agentrax_deletion_test.go).
	operator.WrapAgentRegistrar = gate.wrap
	os.Exit(testenv.Main(m, &env, testenv.Options{
		Controllers: testenv.AllControllers(),
		Cluster:     &testenv.ClusterOptions{},
	}))
}

// namespace creates a namespace that enforces the restricted Pod Security level, deleted after the test (the
// namespace controller really removes it and its contents in this cluster).
func namespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-",
		Labels: map[string]string{testenv.PodSecurityEnforceLabel: "restricted"}}}
	NewWithT(t).Expect(env.Client.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
	return ns.Name
}
