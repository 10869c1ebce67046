package bundle

import (
	"io"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/manager"
)

// subscriptionConfigFile is the Subscription docs/install.md shows and the OLM end-to-end test applies.
var subscriptionConfigFile = repoPath("config", "samples", "olm", "subscription-config.yaml")

// TestSubscriptionConfigIsDocumented: the doc's YAML block is the file, byte for byte, so what readers copy is
// what the end-to-end test installs.
func TestSubscriptionConfigIsDocumented(t *testing.T) {
	g := NewWithT(t)
	file, err := os.ReadFile(subscriptionConfigFile)
	g.Expect(err).NotTo(HaveOccurred())
	doc, err := os.ReadFile(repoPath("docs", "install.md"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(doc)).To(ContainSubstring("```yaml\n"+string(file)+"```\n"),
		"docs/install.md holds config/samples/olm/subscription-config.yaml verbatim in one fenced block")
}

// TestSubscriptionConfigConfiguresTheManager: every variable of the Subscription is a flag's under the rule, with
// a valid value, for a flag the CSV's Deployment does not pass as an argument (an argument would win and the
// variable would silently do nothing), and the settings an OLM install cannot do without are there.
func TestSubscriptionConfigConfiguresTheManager(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(subscriptionConfigFile)
	g.Expect(err).NotTo(HaveOccurred())
	var sub operatorsv1alpha1.Subscription
	g.Expect(yaml.UnmarshalStrict(data, &sub)).To(Succeed())
	g.Expect(sub.Kind).To(Equal("Subscription"))
	g.Expect(sub.Spec).NotTo(BeNil())
	g.Expect(sub.Spec.Package).To(Equal(packageName))
	g.Expect(sub.Spec.Config).NotTo(BeNil())

	var environ []string
	for _, e := range sub.Spec.Config.Env {
		g.Expect(e.ValueFrom).To(BeNil(), "%s: a literal value, so that the test can check it", e.Name)
		environ = append(environ, e.Name+"="+e.Value)
	}
	var args []string
	for _, d := range csv(t).Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				args = c.Args
			}
		}
	}
	g.Expect(args).NotTo(BeEmpty(), "the CSV's manager container")
	for _, arg := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		g.Expect(environ).NotTo(ContainElement(HavePrefix(manager.EnvName(name)+"=")),
			"--%s is an argument of the CSV's Deployment, so its variable would be ignored", name)
	}

	c, err := manager.ParseCommandLine("manager", args, environ, io.Discard)
	g.Expect(err).NotTo(HaveOccurred(), "every variable names a flag and has a valid value")
	g.Expect(c.Options.FleetCredentialsSecret).To(MatchRegexp(`^[a-z0-9-]+/[a-z0-9-]+$`))
	g.Expect(c.Options.PrometheusURL).To(HavePrefix("http"))
	g.Expect(c.Options.Groups).To(ContainElement("gitops"))
}

// TestServiceLinksDoNotStopTheManager: the kubelet gives a pod a variable per Service of its namespace (service
// links: QUARTET_OPERATOR_WEBHOOK_SERVICE_SERVICE_HOST for quartet-operator-webhook-service), and every Service
// of the bundle starts with quartet-operator-, so with service links the manager would meet QUARTET_ variables
// that no flag has and refuse to start.
func TestServiceLinksDoNotStopTheManager(t *testing.T) {
	g := NewWithT(t)
	var environ []string
	for _, d := range csv(t).Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		links := d.Spec.Template.Spec.EnableServiceLinks
		if links != nil && !*links {
			continue
		}
		for _, obj := range theBundle(t).Objects {
			if obj.GetKind() != "Service" {
				continue
			}
			prefix := strings.ToUpper(strings.ReplaceAll(obj.GetName(), "-", "_"))
			environ = append(environ, prefix+"_SERVICE_HOST=10.96.0.10", prefix+"_SERVICE_PORT=443",
				prefix+"_PORT=tcp://10.96.0.10:443", prefix+"_PORT_443_TCP=tcp://10.96.0.10:443")
		}
	}
	_, err := manager.ParseCommandLine("manager", nil, environ, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
}
