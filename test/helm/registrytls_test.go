package helm

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quartet-dev/quartet-operator/internal/manager"
)

// TestRegistryServesTLSWithItsOwnCertificate: with the default values — no cert-manager — the chart starts the
// manager so that it issues the MCP registry's certificate itself for the registry Service the chart renders,
// writes it into a writable directory and publishes its CA; the chart renders neither the Secret nor the
// ConfigMap, which the manager owns (a Helm upgrade would otherwise reset them).
func TestRegistryServesTLSWithItsOwnCertificate(t *testing.T) {
	g := NewWithT(t)
	rendered, err := render(t, nil)
	g.Expect(err).NotTo(HaveOccurred())
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
	o := parsed.Options
	g.Expect(o.RegistryTLSCertDir).NotTo(BeEmpty(), "the registry serves HTTPS, so writes are possible")
	g.Expect(o.RegistryCertSecret).NotTo(BeEmpty(), "the manager issues the registry's certificate itself")
	g.Expect(o.RegistryCAConfigMap).NotTo(BeEmpty(), "and publishes its CA for clients")
	g.Expect(o.RegistryPlaintextWrites).To(BeFalse())
	for _, kind := range []string{"Secret", "ConfigMap"} {
		g.Expect(find(rendered, kind, o.RegistryCertSecret)).To(BeNil(), "the manager owns %s %s", kind, o.RegistryCertSecret)
		g.Expect(find(rendered, kind, o.RegistryCAConfigMap)).To(BeNil(), "the manager owns %s %s", kind, o.RegistryCAConfigMap)
	}

	// The certificate names the Service in front of the registry's container port.
	service := find(rendered, "Service", o.RegistryService)
	g.Expect(service).NotTo(BeNil(), "--registry-service=%s names a Service of the chart", o.RegistryService)
	ports, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports")
	g.Expect(ports).To(ContainElement(HaveKeyWithValue("targetPort", "mcp-registry")))
	g.Expect(container["ports"]).To(ContainElement(And(HaveKeyWithValue("name", "mcp-registry"),
		HaveKeyWithValue("containerPort", BeNumerically("==", 9090)))))

	// The manager writes into the directory: it lies below a writable emptyDir mount (the root filesystem is
	// read-only).
	emptyDirs := map[string]bool{}
	for _, v := range pod["volumes"].([]any) {
		volume := v.(map[string]any)
		_, isEmptyDir := volume["emptyDir"]
		emptyDirs[volume["name"].(string)] = isEmptyDir
	}
	writable := ""
	for _, m := range container["volumeMounts"].([]any) {
		mount := m.(map[string]any)
		path := mount["mountPath"].(string)
		if strings.HasPrefix(o.RegistryTLSCertDir+"/", strings.TrimSuffix(path, "/")+"/") && len(path) > len(writable) {
			writable = path
			g.Expect(emptyDirs[mount["name"].(string)] && mount["readOnly"] != true).To(BeTrue(),
				"%s lies below mount %s, which must be a writable emptyDir", o.RegistryTLSCertDir, path)
		}
	}
	g.Expect(writable).NotTo(BeEmpty(), "%s lies below a mounted volume", o.RegistryTLSCertDir)
}
