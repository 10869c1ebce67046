package bundle

import (
	"testing"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// webhookConfigs reads the generated config/webhook/manifests.yaml.
func webhookConfigs(t *testing.T) (validating []admissionregistrationv1.ValidatingWebhook, mutating []admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	g := NewWithT(t)
	for _, obj := range documents(t, repoPath("config", "webhook", "manifests.yaml")) {
		switch obj.GetKind() {
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, c)).To(Succeed())
			validating = append(validating, c.Webhooks...)
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, c)).To(Succeed())
			mutating = append(mutating, c.Webhooks...)
		}
	}
	return validating, mutating
}

// definition finds the CSV webhookdefinition generated from the webhook called name.
func definition(t *testing.T, typ operatorsv1alpha1.WebhookAdmissionType, name string) *operatorsv1alpha1.WebhookDescription {
	t.Helper()
	defs := csv(t).Spec.WebhookDefinitions
	for i := range defs {
		if defs[i].Type == typ && defs[i].GenerateName == name {
			return &defs[i]
		}
	}
	return nil
}

// expectServedByTheManager checks what every webhookdefinition needs to reach the manager's webhook server.
func expectServedByTheManager(g Gomega, t *testing.T, def *operatorsv1alpha1.WebhookDescription) {
	t.Helper()
	var deployments []string
	for _, d := range csv(t).Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		deployments = append(deployments, d.Name)
	}
	g.Expect(deployments).To(ContainElement(def.DeploymentName), "deploymentName %q is not a CSV deployment", def.DeploymentName)
	g.Expect(def.ContainerPort).To(BeEquivalentTo(443))
	g.Expect(def.TargetPort).NotTo(BeNil())
	g.Expect(def.TargetPort.IntValue()).To(Equal(9443), "the manager's --webhook-port")
	g.Expect(def.AdmissionReviewVersions).To(Equal([]string{"v1"}))
}

// TestWebhookDefinitionsCoverEveryWebhook: each validating and mutating webhook of config/webhook/manifests.yaml
// has a webhookdefinition with the same path, rules and policies, served by the CSV's deployment.
func TestWebhookDefinitionsCoverEveryWebhook(t *testing.T) {
	validating, mutating := webhookConfigs(t)
	NewWithT(t).Expect(len(csv(t).Spec.WebhookDefinitions)).To(BeNumerically(">=", len(validating)+len(mutating)))
	for _, w := range validating {
		t.Run(w.Name, func(t *testing.T) {
			g := NewWithT(t)
			def := definition(t, operatorsv1alpha1.ValidatingAdmissionWebhook, w.Name)
			g.Expect(def).NotTo(BeNil(), "no ValidatingAdmissionWebhook definition: run `make bundle`")
			expectServedByTheManager(g, t, def)
			g.Expect(def.WebhookPath).To(Equal(w.ClientConfig.Service.Path))
			g.Expect(def.Rules).To(Equal(w.Rules))
			g.Expect(def.FailurePolicy).To(Equal(w.FailurePolicy))
			g.Expect(def.SideEffects).To(Equal(w.SideEffects))
			g.Expect(def.TimeoutSeconds).To(Equal(w.TimeoutSeconds))
		})
	}
	for _, w := range mutating {
		t.Run(w.Name, func(t *testing.T) {
			g := NewWithT(t)
			def := definition(t, operatorsv1alpha1.MutatingAdmissionWebhook, w.Name)
			g.Expect(def).NotTo(BeNil(), "no MutatingAdmissionWebhook definition: run `make bundle`")
			expectServedByTheManager(g, t, def)
			g.Expect(def.WebhookPath).To(Equal(w.ClientConfig.Service.Path))
			g.Expect(def.Rules).To(Equal(w.Rules))
			g.Expect(def.FailurePolicy).To(Equal(w.FailurePolicy))
			g.Expect(def.SideEffects).To(Equal(w.SideEffects))
			g.Expect(def.TimeoutSeconds).To(Equal(w.TimeoutSeconds))
			g.Expect(def.ReinvocationPolicy).To(Equal(w.ReinvocationPolicy))
		})
	}
}

// TestWebhookDefinitionsAreSafeUnderOLM: OLM scopes admission webhooks itself (no namespaceSelector), rules never
// reach webhook configurations or every group, and conversion webhooks only exist with AllNamespaces-only installs.
func TestWebhookDefinitionsAreSafeUnderOLM(t *testing.T) {
	c := csv(t)
	conversion := false
	for _, def := range c.Spec.WebhookDefinitions {
		t.Run(def.GenerateName, func(t *testing.T) {
			g := NewWithT(t)
			expectServedByTheManager(g, t, &def)
			// admission/v1 allows only None and NoneOnDryRun; the agentrax quota webhook records reservations, but
			// never on dry-run requests.
			g.Expect(def.SideEffects).To(HaveValue(BeElementOf(
				admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.SideEffectClassNoneOnDryRun)))
			for _, r := range def.Rules {
				g.Expect(r.APIGroups).NotTo(ContainElement("*"))
				g.Expect(r.APIGroups).NotTo(ContainElement("admissionregistration.k8s.io"))
				g.Expect(r.Resources).NotTo(ContainElement("*"))
			}
		})
		if def.Type == operatorsv1alpha1.ConversionWebhook {
			conversion = true
		}
	}
	for _, crd := range theBundle(t).V1CRDs {
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
			NewWithT(t).Expect(c.Spec.WebhookDefinitions).To(ContainElement(And(
				HaveField("Type", operatorsv1alpha1.ConversionWebhook),
				HaveField("ConversionCRDs", ContainElement(crd.Name)),
			)), "%s converts through a webhook that has no ConversionWebhook definition", crd.Name)
		}
	}
	if conversion {
		for _, m := range c.Spec.InstallModes {
			NewWithT(t).Expect(m.Supported).To(Equal(m.Type == operatorsv1alpha1.InstallModeTypeAllNamespaces),
				"OLM requires AllNamespaces-only install modes with conversion webhooks")
		}
	}
}
