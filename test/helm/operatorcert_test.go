package helm

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/monitoring"
)

// operatorCertValues makes the manager generate its webhook certificate itself.
func operatorCertValues() map[string]any {
	return map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "operator"}}}
}

// TestOperatorCertificateSource: with source operator the chart renders no cert-manager object and no caBundle,
// and tells the manager, by the chart's own object names, which Secret to keep the certificate in, which Service
// it is for and which webhook configurations to fill.
func TestOperatorCertificateSource(t *testing.T) {
	g := NewWithT(t)
	rendered, err := render(t, operatorCertValues())
	g.Expect(err).NotTo(HaveOccurred())

	for _, o := range rendered {
		g.Expect(o.GetKind()).NotTo(BeElementOf("Certificate", "Issuer"), o.GetName())
		// The one Secret is the metrics scraper's ServiceAccount token (config/rbac/metrics_scraper.yaml), not a
		// certificate.
		if o.GetKind() == "Secret" {
			g.Expect(o.GetName()).To(Equal(monitoring.ScraperTokenSecret))
		}
	}
	configurations := map[string][]string{}
	for _, o := range rendered {
		if o.GetKind() != "ValidatingWebhookConfiguration" && o.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		configurations[o.GetKind()] = append(configurations[o.GetKind()], o.GetName())
		g.Expect(o.GetAnnotations()).NotTo(HaveKey("cert-manager.io/inject-ca-from"), o.GetName())
		webhooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		g.Expect(webhooks).NotTo(BeEmpty())
		for _, hook := range webhooks {
			g.Expect(hook.(map[string]any)["clientConfig"]).NotTo(HaveKey("caBundle"), o.GetName())
		}
	}
	g.Expect(configurations).To(HaveLen(2), "a validating and a mutating configuration")
	service := find(rendered, "Service", installed.WebhookService)
	g.Expect(service).NotTo(BeNil())

	d := find(rendered, "Deployment", installed.Deployment)
	g.Expect(d).NotTo(BeNil())
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	container := pod["containers"].([]any)[0].(map[string]any)
	var args []string
	for _, a := range container["args"].([]any) {
		args = append(args, a.(string))
	}
	parsed, err := manager.ParseCommandLine("manager", args, nil, new(discard))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed.Options.WebhookCertSecret).NotTo(BeEmpty())
	g.Expect(parsed.Options.WebhookService).To(Equal(service.GetName()))
	g.Expect(parsed.Options.WebhookValidatingConfigurations).To(ConsistOf(configurations["ValidatingWebhookConfiguration"]))
	g.Expect(parsed.Options.WebhookMutatingConfigurations).To(ConsistOf(configurations["MutatingWebhookConfiguration"]))

	// The manager writes the certificate into its directory: a writable emptyDir, not a Secret volume.
	g.Expect(pod["volumes"]).To(ContainElement(And(
		HaveKeyWithValue("name", "webhook-certs"), HaveKey("emptyDir"), Not(HaveKey("secret")))))
	g.Expect(container["volumeMounts"]).To(ContainElement(And(
		HaveKeyWithValue("name", "webhook-certs"), Not(HaveKeyWithValue("readOnly", true)))))

	// The other sources leave the flags out: the certificate comes from elsewhere.
	rendered, err = render(t, map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "cert-manager"}}})
	g.Expect(err).NotTo(HaveOccurred())
	d = find(rendered, "Deployment", installed.Deployment)
	g.Expect(d).NotTo(BeNil())
	defaultArgs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	g.Expect(defaultArgs[0].(map[string]any)["args"]).NotTo(ContainElement(HavePrefix("--webhook-cert-secret")))
}
