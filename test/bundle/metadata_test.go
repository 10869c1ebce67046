package bundle

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/quartet-dev/quartet-operator/internal/monitoring"
)

// openShiftForKube maps a Kubernetes minor to the OpenShift 4 minor built on it: 4.17 ships 1.30, and every
// OpenShift minor since 4.6 (1.19) moves one Kubernetes minor.
func openShiftForKube(kubeMinor uint) string {
	return fmt.Sprintf("v4.%d", kubeMinor-13)
}

func TestOpenShiftForKube(t *testing.T) {
	for kube, openshift := range map[uint]string{29: "v4.16", 30: "v4.17", 31: "v4.18"} {
		NewWithT(t).Expect(openShiftForKube(kube)).To(Equal(openshift), "Kubernetes 1.%d", kube)
	}
}

// TestOpenShiftListingAnnotations: the annotations OperatorHub's community CI and the OpenShift console read. The
// OpenShift range starts at the release that ships minKubeVersion ("v4.17" means 4.17 and later), in the CSV and in
// the bundle image's metadata, where the catalog tooling reads it.
func TestOpenShiftListingAnnotations(t *testing.T) {
	g := NewWithT(t)
	c := csv(t)
	minKube, err := version.ParseSemantic(c.Spec.MinKubeVersion)
	g.Expect(err).NotTo(HaveOccurred(), "spec.minKubeVersion")
	openshift := openShiftForKube(minKube.Minor())

	g.Expect(c.Annotations).To(HaveKeyWithValue("com.redhat.openshift.versions", openshift))
	g.Expect(annotations(t)).To(HaveKeyWithValue("com.redhat.openshift.versions", openshift))
	// docs/install.md installs into this namespace; the console offers it and labels it for cluster monitoring.
	g.Expect(c.Annotations).To(HaveKeyWithValue("operatorframework.io/suggested-namespace", "quartet-operator"))
	g.Expect(c.Annotations).To(HaveKeyWithValue("operatorframework.io/cluster-monitoring", "true"))
}

// TestExamplesCarryNoPlaceholderImage: no image an example names is the kubebuilder placeholder or a floating tag,
// and the Platform example runs katastroma from the released operator image.
func TestExamplesCarryNoPlaceholderImage(t *testing.T) {
	g := NewWithT(t)
	operatorImage := csv(t).Annotations["containerImage"]
	seen := 0
	forEachExample(t, func(g Gomega, ex *unstructured.Unstructured) {
		walkImages(ex.Object, func(path, image string) {
			seen++
			g.Expect(image).NotTo(HavePrefix("controller:"), path)
			g.Expect(image).NotTo(HaveSuffix(":latest"), path)
			g.Expect(image).To(MatchRegexp(`[:@]`), "%s: pinned to a tag or digest", path)
			if ex.GetKind() == "Platform" {
				g.Expect(image).To(Equal(operatorImage), "%s: the operator image ships /katastroma", path)
			}
		})
	})
	g.Expect(seen).To(BeNumerically(">", 0))
}

// walkImages calls fn for every string field named "image" under v.
func walkImages(v any, fn func(path, image string)) {
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				if s, ok := child.(string); ok && k == "image" {
					fn(path+"."+k, s)
					continue
				}
				walk(path+"."+k, child)
			}
		case []any:
			for i, child := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), child)
			}
		}
	}
	walk("", v)
}

// The kinds OLM installs from a registry+v1 bundle besides CRDs and the CSV.
var olmSupportedKinds = map[string]bool{
	"Secret": true, "ConfigMap": true, "Service": true, "ServiceAccount": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"PrometheusRule": true, "ServiceMonitor": true, "PodDisruptionBudget": true, "PriorityClass": true,
	"VerticalPodAutoscaler": true, "ConsoleYAMLSample": true, "ConsoleQuickStart": true,
	"ConsoleCLIDownload": true, "ConsoleLink": true,
}

// TestBundleShipsMonitoring: the binding that lets OpenShift's cluster Prometheus (openshift-monitoring/prometheus-k8s)
// read /metrics, which the manager authorizes with a SubjectAccessReview on the metrics-reader ClusterRole, and no
// object of the Prometheus Operator's kinds: OLM fails the whole InstallPlan on a cluster without those CRDs, so the
// manager creates its ServiceMonitors and PrometheusRules itself where they are served (internal/monitoring, which
// also checks it embeds one monitor for the manager and one rule set per group).
func TestBundleShipsMonitoring(t *testing.T) {
	g := NewWithT(t)
	var monitors, rules []string
	readerBound := false
	for _, obj := range theBundle(t).Objects {
		kind := obj.GetKind()
		if kind == "CustomResourceDefinition" || kind == "ClusterServiceVersion" {
			continue
		}
		g.Expect(olmSupportedKinds).To(HaveKey(kind), "%s %s: OLM cannot install this kind from a bundle", kind, obj.GetName())
		switch kind {
		case "ServiceMonitor":
			monitors = append(monitors, obj.GetName())
		case "PrometheusRule":
			rules = append(rules, obj.GetLabels()["app.kubernetes.io/component"])
		case "ClusterRoleBinding":
			ref, _ := obj.Object["roleRef"].(map[string]any)
			subjects, _ := obj.Object["subjects"].([]any)
			for _, s := range subjects {
				s, _ := s.(map[string]any)
				if strings.HasSuffix(fmt.Sprint(ref["name"]), "metrics-reader") && s["kind"] == "ServiceAccount" &&
					s["namespace"] == "openshift-monitoring" && s["name"] == "prometheus-k8s" {
					readerBound = true
				}
			}
		}
	}
	g.Expect(monitors).To(BeEmpty(), "ServiceMonitors in the bundle")
	g.Expect(rules).To(BeEmpty(), "PrometheusRules in the bundle")
	embedded, err := monitoring.Objects("any", nil)
	g.Expect(err).NotTo(HaveOccurred())
	monitors, rules = nil, nil
	for _, obj := range embedded {
		switch obj.GetKind() {
		case "ServiceMonitor":
			monitors = append(monitors, obj.GetName())
		case "PrometheusRule":
			rules = append(rules, obj.GetLabels()["app.kubernetes.io/component"])
		}
	}
	g.Expect(monitors).To(ContainElement(HaveSuffix("controller-manager-metrics-monitor")), "the manager applies these")
	g.Expect(rules).To(ConsistOf("fleet", "gnmic", "agentrax", "gitops"))
	g.Expect(readerBound).To(BeTrue(), "a ClusterRoleBinding grants openshift-monitoring/prometheus-k8s the metrics-reader role")
}

// forEachExample runs fn on every alm-example of the CSV, one subtest each.
func forEachExample(t *testing.T, fn func(g Gomega, ex *unstructured.Unstructured)) {
	t.Helper()
	examples := almExamples(t)
	NewWithT(t).Expect(examples).NotTo(BeEmpty())
	for _, ex := range examples {
		t.Run(ex.GetKind()+"/"+ex.GetName(), func(t *testing.T) { fn(NewWithT(t), ex) })
	}
}
