package olm

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

var schemaJobList = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "JobList"}

// subscriptionFile is the Subscription docs/install.md shows; the test installs with exactly this object.
const subscriptionFile = "config/samples/olm/subscription-config.yaml"

func subscriptionFromDocs(t *testing.T) *operatorsv1alpha1.Subscription {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), subscriptionFile))
	g.Expect(err).NotTo(HaveOccurred())
	sub := &operatorsv1alpha1.Subscription{}
	g.Expect(yaml.UnmarshalStrict(data, sub)).To(Succeed())
	g.Expect(sub.Spec).NotTo(BeNil())
	g.Expect(sub.Namespace).To(Equal(installNamespace))
	g.Expect(sub.Spec.Package).To(Equal(packageName))
	g.Expect(sub.Spec.Channel).To(Equal(channelName))
	g.Expect(sub.Spec.Config).NotTo(BeNil(), "the Subscription configures the manager through spec.config.env")
	return sub
}

// installed names what OLM created for the manager.
var installed = asinstalled.Install{
	Namespace:      installNamespace,
	Deployment:     deploymentName,
	ServiceAccount: serviceAccount,
	// OLM's Service in front of the webhook port and the serving certificate it generated.
	WebhookService: deploymentName + "-service",
	CertSecret:     deploymentName + "-service-cert",
	Inventory:      "olm-test",
}

// runAsInstalled runs the manager as OLM installed it (internal/testenv/asinstalled), waits for the samples' steady
// state, sees a canary query the Prometheus the Subscription names, and finds no forbidden answer in the audit log.
func runAsInstalled(t *testing.T) *asinstalled.Manager {
	t.Helper()
	m := asinstalled.Start(t, env, installed)
	NewWithT(t).Expect(m.Prometheus).NotTo(BeNil(), "the Subscription sets QUARTET_PROMETHEUS_URL")
	m.ApplySamples(t)
	m.WaitConverged(t)
	canaryQueriesConfiguredPrometheus(t, m.Prometheus)
	m.AssertNothingForbidden(t)
	m.TryEscalations(t)
	return m
}
