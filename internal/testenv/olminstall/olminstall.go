// Package olminstall installs the operator the way users do, through OLM's own olm and catalog operators (built
// from operator-lifecycle-manager by `make olm`): it renders the bundle into an offline file-based catalog, serves
// it with opm, and subscribes to the package; the install waits until the InstallPlan is Complete and the CSV
// Succeeded. test/olm runs the manager binary as installed; test/realnode runs the installed Deployment's pod.
package olminstall

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// Where OLM installs the operator, and the names the bundle gives it.
const (
	Namespace      = "quartet-operator"
	PackageName    = "quartet-operator"
	ChannelName    = "candidate"
	DeploymentName = "quartet-operator-controller-manager"
	ServiceAccount = "quartet-operator-controller-manager"
	// WebhookService is the Service OLM creates in front of the webhook port, CertSecret the serving certificate
	// it generates for it.
	WebhookService = DeploymentName + "-service"
	CertSecret     = DeploymentName + "-service-cert"
	// OLMNamespace is where OLM's operators run and the CatalogSource lives.
	OLMNamespace = "olm"
)

// Binaries finds `make olm`'s output: bin/olm, then the cache. A missing build is an error, never a skip.
func Binaries() (string, error) {
	for _, dir := range []string{
		filepath.Join(testenv.RepoRoot(), "bin", "olm"),
		filepath.Join(testenv.CacheDir(), "olm", "v0.42.0"),
	} {
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("OLM's olm and catalog binaries are not built: run `make olm` (make test does)")
}

// CRDs is the directory of OLM's CRDs in the directory Binaries found.
func CRDs(olmDir string) string { return filepath.Join(olmDir, "crds") }

// OPM finds the opm `make bundle` builds.
func OPM() (string, error) {
	path := filepath.Join(testenv.RepoRoot(), "bin", "opm")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("opm not found at %s: run `make bundle` (make test does)", path)
	}
	return path, nil
}

// NewClient is an administrator's client that also knows OLM's kinds.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme := operator.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{operatorsv1alpha1.AddToScheme, operatorsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// ServeCatalog runs `opm serve dir` on a free port beside env's cluster and waits until it accepts connections;
// it returns the address. Its profiling endpoint gets a free port too (opm's default, localhost:6060, is taken by
// a second server).
func ServeCatalog(t *testing.T, env *testenv.Env, name, opm, dir string) string {
	t.Helper()
	g := gomega.NewWithT(t)
	port, err := asinstalled.FreePort()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	pprofPort, err := asinstalled.FreePort()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	proc, err := env.Cluster.Run(name, nil, opm, "serve", dir, "-p", strconv.Itoa(port),
		"--pprof-addr", fmt.Sprintf("127.0.0.1:%d", pprofPort), "-t", filepath.Join(t.TempDir(), "termination-log"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = proc.Stop() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	g.Eventually(func(g gomega.Gomega) {
		g.Expect(proc.Exited()).To(gomega.Succeed())
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_ = conn.Close()
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(gomega.Succeed())
	return addr
}

// Operators are OLM's olm and catalog operators, running beside the cluster.
type Operators struct {
	OLM, Catalog *testenv.Process
}

// StartOperators makes OLM's namespace and runs its olm and catalog operators (binaries in olmDir) as a cluster
// administrator, until the test ends.
func StartOperators(t *testing.T, env *testenv.Env, olmDir string) *Operators {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OLMNamespace}})
	g.Expect(client.IgnoreAlreadyExists(err)).To(gomega.Succeed())
	kubeconfig, err := env.AddAdminKubeconfig("olm")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	kubeconfigFile := filepath.Join(t.TempDir(), "olm.kubeconfig")
	g.Expect(os.WriteFile(kubeconfigFile, kubeconfig, 0o600)).To(gomega.Succeed())
	olmEnv := []string{"KUBECONFIG=" + kubeconfigFile}
	ops := &Operators{}
	ops.OLM, err = env.Cluster.Run("olm-operator", olmEnv, filepath.Join(olmDir, "olm"),
		"--namespace="+OLMNamespace, "--writeStatusName=", "--writePackageServerStatusName=")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = ops.OLM.Stop() })
	ops.Catalog, err = env.Cluster.Run("catalog-operator", olmEnv, filepath.Join(olmDir, "catalog"), "--namespace="+OLMNamespace)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = ops.Catalog.Stop() })
	return ops
}

// Alive fails g when either operator has exited.
func (o *Operators) Alive(g gomega.Gomega) {
	g.Expect(o.OLM.Exited()).To(gomega.Succeed())
	g.Expect(o.Catalog.Exited()).To(gomega.Succeed())
}

// Subscribe creates the install namespace (when missing), the CatalogSource sub names at catalogAddr, an
// OperatorGroup for all namespaces and sub itself, then waits until sub's InstallPlan is Complete and the CSV
// bundle Succeeded; it returns the CSV.
func Subscribe(t *testing.T, olmClient client.Client, ops *Operators, catalogAddr, bundle string, sub *operatorsv1alpha1.Subscription) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	err := olmClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sub.Namespace}})
	g.Expect(client.IgnoreAlreadyExists(err)).To(gomega.Succeed())
	g.Expect(olmClient.Create(ctx, &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: sub.Spec.CatalogSourceNamespace, Name: sub.Spec.CatalogSource},
		Spec: operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc,
			Address: catalogAddr, DisplayName: "Quartet (offline)"},
	})).To(gomega.Succeed())
	g.Expect(olmClient.Create(ctx, &operatorsv1.OperatorGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: sub.Namespace, Name: PackageName},
	})).To(gomega.Succeed())
	g.Expect(olmClient.Create(ctx, sub)).To(gomega.Succeed())

	g.Eventually(func(g gomega.Gomega) {
		ops.Alive(g)
		g.Expect(olmClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(gomega.Succeed())
		g.Expect(sub.Status.InstallPlanRef).NotTo(gomega.BeNil(), "subscription status: %+v", sub.Status.Conditions)
		plan := &operatorsv1alpha1.InstallPlan{}
		g.Expect(olmClient.Get(ctx, client.ObjectKey{Namespace: sub.Namespace, Name: sub.Status.InstallPlanRef.Name}, plan)).To(gomega.Succeed())
		g.Expect(plan.Status.Phase).To(gomega.Equal(operatorsv1alpha1.InstallPlanPhaseComplete), "install plan: %+v", plan.Status.Conditions)
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(gomega.Succeed())

	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	g.Eventually(func(g gomega.Gomega) {
		ops.Alive(g)
		g.Expect(olmClient.Get(ctx, client.ObjectKey{Namespace: sub.Namespace, Name: bundle}, csv)).To(gomega.Succeed())
		g.Expect(csv.Status.Phase).To(gomega.Equal(operatorsv1alpha1.CSVPhaseSucceeded), "CSV %s: %s", csv.Status.Reason, csv.Status.Message)
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(gomega.Succeed())
	return csv
}
