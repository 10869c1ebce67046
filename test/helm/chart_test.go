package helm

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/helmchart"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// TestLint runs `helm lint --strict` with the default and the non-default values.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"default": nil, "non-default": nonDefaultValues(t), "cluster issuer": clusterIssuerValues(),
		"operator certificates": operatorCertValues(),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = releaseNamespace
			result := lint.Run([]string{chartDir()}, vals)
			var findings []string
			for _, m := range result.Messages {
				if m.Severity > support.InfoSev {
					findings = append(findings, m.Error())
				}
			}
			g.Expect(result.Errors).To(BeEmpty())
			g.Expect(findings).To(BeEmpty())
			g.Expect(result.TotalChartsLinted).To(Equal(1))
		})
	}
}

// TestSchemaRejectsWhatTheManagerWouldNot: a misspelled flag, a flag the chart sets itself and a wrong type fail
// at install time, naming the value, instead of when the manager starts (or never).
func TestSchemaRejectsWhatTheManagerWouldNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"misspelled flag", map[string]any{"config": map[string]any{"log-lvl": "debug"}}, "log-lvl"},
		{"chart-owned flag", map[string]any{"config": map[string]any{"leader-elect": "false"}}, "leader-elect"},
		{"unknown group", map[string]any{"groups": []any{"gnmi"}}, "groups"},
		{"unknown certificate source", map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "self"}}}, "source"},
		{"secret without its name", map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "secret", "caBundle": "Zm9v"}}}, "webhook.certificates.secretName"},
		{"secret without a CA", map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "secret", "secretName": "tls"}}}, "webhook.certificates.caBundle"},
		{"replicas as text", map[string]any{"replicaCount": "two"}, "replicaCount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.vals)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// helmOnlyLabels are the labels the chart adds to what config/ has.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// TestDefaultsRenderConfigDefault: with default values the chart's templates are exactly the objects
// `kustomize build config/default` gives (but its Namespace and CRDs, which are the release namespace and crds/),
// in the release namespace, with Helm's labels instead of kustomize's managed-by.
func TestDefaultsRenderConfigDefault(t *testing.T) {
	g := NewWithT(t)
	// config/default takes its webhook certificate from cert-manager; the chart's default source is the operator
	// (TestDefaultInstallNeedsNoCertManager), so the two are compared with the chart set to cert-manager.
	rendered, err := render(t, map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "cert-manager"}}})
	g.Expect(err).NotTo(HaveOccurred())
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), testenv.RepoRoot()+"/config/default")
	g.Expect(err).NotTo(HaveOccurred())

	want := map[string]map[string]any{}
	for _, r := range resources.Resources() {
		if r.GetKind() == "Namespace" || r.GetKind() == "CustomResourceDefinition" {
			continue
		}
		obj, err := r.Map()
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: normalized(obj).(map[string]any)}
		if u.GetNamespace() != "" {
			u.SetNamespace(releaseNamespace)
		}
		replaceNamespace(u.Object)
		want[key(u)] = comparable(u)
	}
	got := map[string]map[string]any{}
	for _, u := range rendered {
		labels := u.GetLabels()
		g.Expect(labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), key(u))
		g.Expect(labels).To(HaveKeyWithValue("app.kubernetes.io/instance", releaseName), key(u))
		if u.GetKind() == "Deployment" {
			// The one field the chart adds: config/ leaves the pull policy to the API server's default.
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			g.Expect(containers[0]).To(HaveKeyWithValue("imagePullPolicy", "IfNotPresent"))
			delete(containers[0].(map[string]any), "imagePullPolicy")
			g.Expect(unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
		}
		got[key(u)] = comparable(u)
	}
	g.Expect(sortedKeys(got)).To(Equal(sortedKeys(want)))
	for k := range want {
		g.Expect(got[k]).To(Equal(want[k]), k)
	}
}

func key(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// comparable drops the labels only one side has and normalizes "--leader-elect" (config/) against
// "--leader-elect=true" (the chart's value).
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	labels := c.GetLabels()
	for _, l := range helmOnlyLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		labels = nil
	}
	c.SetLabels(labels)
	if annotations := c.GetAnnotations(); annotations != nil && len(annotations) == 0 {
		c.SetAnnotations(nil)
	}
	if c.GetKind() == "Deployment" {
		containers, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers")
		container := containers[0].(map[string]any)
		args := container["args"].([]any)
		for i, a := range args {
			if a == "--leader-elect=true" {
				args[i] = "--leader-elect"
			}
		}
		// The chart renders the monitoring objects from values, so it turns the manager's own off.
		args = slices.DeleteFunc(args, func(a any) bool { return a == "--monitoring-objects=false" })
		container["args"] = args
		_ = unstructured.SetNestedSlice(c.Object, containers, "spec", "template", "spec", "containers")
	}
	return normalized(c.Object).(map[string]any)
}

// replaceNamespace rewrites config/default's namespace wherever it appears in a string (webhook Services,
// Certificate DNS names, the inject-ca-from annotation, RBAC subjects).
func replaceNamespace(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if s, ok := sub.(string); ok {
				v[k] = replaceIn(k, s)
			} else {
				replaceNamespace(sub)
			}
		}
	case []any:
		for i, sub := range v {
			if s, ok := sub.(string); ok {
				v[i] = replaceIn("", s)
			} else {
				replaceNamespace(sub)
			}
		}
	}
}

// replaceIn swaps the install namespace where config/ uses it as one: a namespace field, a Service's DNS name,
// and a cert-manager <namespace>/<certificate> reference. The namespace is also the value of
// app.kubernetes.io/name and the stem of every object's name, which stay.
func replaceIn(key, s string) string {
	ns := helmchart.InstallNamespace
	switch {
	case key == "namespace" && s == ns:
		return releaseNamespace
	case key == "cert-manager.io/inject-ca-from" && strings.HasPrefix(s, ns+"/"):
		return releaseNamespace + strings.TrimPrefix(s, ns)
	}
	return strings.ReplaceAll(s, "."+ns+".svc", "."+releaseNamespace+".svc")
}

// TestValuesReachTheObjects: every non-default value shows up where it should, and each config entry becomes the
// variable the manager's environment rule reads for that flag.
func TestValuesReachTheObjects(t *testing.T) {
	g := NewWithT(t)
	vals := nonDefaultValues(t)
	rendered, err := render(t, vals)
	g.Expect(err).NotTo(HaveOccurred())

	d := find(rendered, "Deployment", "quartet-operator-controller-manager")
	g.Expect(d).NotTo(BeNil())
	g.Expect(d.Object["spec"]).To(HaveKeyWithValue("replicas", BeEquivalentTo(2)))

	// groups: [gnmic, fleet] grants those groups' rights and what every group needs, nothing of the others'.
	for _, group := range operator.Groups {
		role := find(rendered, "ClusterRole", "quartet-operator-manager-role-"+group)
		binding := find(rendered, "ClusterRoleBinding", "quartet-operator-manager-rolebinding-"+group)
		if group == "gnmic" || group == "fleet" {
			g.Expect(role).NotTo(BeNil(), group)
			g.Expect(binding).NotTo(BeNil(), group)
		} else {
			g.Expect(role).To(BeNil(), "%s is not enabled: its ClusterRole is not rendered", group)
			g.Expect(binding).To(BeNil(), group)
		}
	}
	g.Expect(find(rendered, "ClusterRole", "quartet-operator-manager-role")).NotTo(BeNil())
	g.Expect(find(rendered, "ClusterRole", "quartet-operator-katastroma-tenant-provisioner")).To(BeNil(), "the gitops stage roles go with gitops")
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	for _, field := range []string{"imagePullSecrets", "nodeSelector", "tolerations", "affinity", "priorityClassName"} {
		g.Expect(normalized(pod[field])).To(Equal(normalized(vals[field])), field)
	}
	g.Expect(normalized(pod["securityContext"])).To(Equal(normalized(vals["podSecurityContext"])))
	annotations, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
	g.Expect(annotations).To(HaveKeyWithValue("example.com/team", "telemetry"))
	labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	g.Expect(labels).To(HaveKeyWithValue("example.com/tier", "operators"))

	container := pod["containers"].([]any)[0].(map[string]any)
	g.Expect(container["image"]).To(Equal("registry.example.com/quartet/operator:v9.9.9"))
	g.Expect(container["imagePullPolicy"]).To(Equal("Always"))
	g.Expect(normalized(container["resources"])).To(Equal(normalized(vals["resources"])))
	g.Expect(normalized(container["securityContext"])).To(Equal(normalized(vals["securityContext"])))
	g.Expect(container["args"]).To(ContainElements("--leader-elect=false", "--groups=gnmic,fleet"))

	env := map[string]string{}
	for _, e := range container["env"].([]any) {
		e := e.(map[string]any)
		if v, ok := e["value"].(string); ok {
			env[e["name"].(string)] = v
		}
	}
	config := vals["config"].(map[string]any)
	for flag, value := range config {
		g.Expect(env).To(HaveKeyWithValue(manager.EnvName(flag), fmt.Sprint(value)), flag)
	}
	g.Expect(env).To(HaveKeyWithValue("OTEL_SERVICE_NAME", "quartet"))
	// The manager accepts the rendered environment: no unknown QUARTET_ variable, every value parses.
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	args := make([]string, 0)
	for _, a := range container["args"].([]any) {
		args = append(args, a.(string))
	}
	_, err = manager.ParseCommandLine("manager", args, environ, new(discard))
	g.Expect(err).NotTo(HaveOccurred())

	volumes := pod["volumes"].([]any)
	g.Expect(volumes).To(ContainElement(HaveKeyWithValue("secret", HaveKeyWithValue("secretName", "quartet-webhook-tls"))))

	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		for _, w := range rendered {
			if w.GetKind() != kind {
				continue
			}
			g.Expect(w.GetAnnotations()).NotTo(HaveKey("cert-manager.io/inject-ca-from"), kind)
			webhooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
			for _, hook := range webhooks {
				caBundle, _, _ := unstructured.NestedString(hook.(map[string]any), "clientConfig", "caBundle")
				g.Expect(caBundle).To(Equal(vals["webhook"].(map[string]any)["certificates"].(map[string]any)["caBundle"]), kind)
			}
		}
	}
	for _, k := range []string{"Certificate", "Issuer"} {
		for _, o := range rendered {
			g.Expect(o.GetKind()).NotTo(Equal(k), "the secret source renders no cert-manager objects")
		}
	}
	g.Expect(find(rendered, "NetworkPolicy", "quartet-operator-allow-webhook-traffic")).NotTo(BeNil())
	g.Expect(find(rendered, "ServiceMonitor", "quartet-operator-controller-manager-metrics-monitor")).NotTo(BeNil())
	for _, group := range []string{"fleet", "gnmic", "agentrax", "gitops"} {
		g.Expect(find(rendered, "PrometheusRule", "quartet-operator-"+group+"-alerts")).NotTo(BeNil(), group)
		dashboard := find(rendered, "ConfigMap", "quartet-operator-"+group+"-grafana-dashboard")
		g.Expect(dashboard).NotTo(BeNil(), group)
		g.Expect(dashboard.GetNamespace()).To(Equal(dashboardNamespace), "dashboards go where the Grafana sidecar looks")
		g.Expect(dashboard.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		source := readObject(t, filepath.Join(testenv.RepoRoot(), "config", "components", group+"-grafana-dashboard", "dashboard-configmap.yaml"))
		g.Expect(dashboard.Object["data"]).To(Equal(source.Object["data"]), "the dashboard JSON reaches the ConfigMap as it is (Grafana's {{legend}} braces too)")
	}

	// A user's ClusterIssuer replaces the chart's self-signed Issuer.
	rendered, err = render(t, clusterIssuerValues())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(find(rendered, "Issuer", "quartet-operator-selfsigned-issuer")).To(BeNil())
	cert := find(rendered, "Certificate", "quartet-operator-serving-cert")
	g.Expect(cert).NotTo(BeNil())
	issuerRef, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	g.Expect(issuerRef).To(Equal(
		map[string]string{"name": "corporate-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}))
}

// TestRenderedObjectsPassServerSideDryRun sends the chart's CRDs and every object it renders, for each values set,
// to the API server as a dry run with strict field validation: a field the API does not know, a bad value or a
// missing kind fails.
func TestRenderedObjectsPassServerSideDryRun(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	// The plane serves neither cert-manager nor the Prometheus Operator (the default install needs neither); the
	// non-default values render their kinds, so their CRDs are here for this test only.
	monitoringCRDs, err := testenv.ThirdPartyCRDPaths()
	g.Expect(err).NotTo(HaveOccurred())
	monitoringCRDs = slices.DeleteFunc(monitoringCRDs, func(p string) bool { return !testenv.IsMonitoringCRD(p) })
	env.InstallCRDs(t, append(monitoringCRDs, filepath.Join("testdata", "cert-manager-standin-crds.yaml"))...)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace + "-dry-run"}}
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, ns))).To(Succeed())
	for _, crd := range chartCRDs(t) {
		// Installed already when the install test ran first: then the dry run is the update an upgrade would make.
		existing := crd.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), existing); err == nil {
			crd.SetResourceVersion(existing.GetResourceVersion())
			g.Expect(env.Client.Update(ctx, crd, client.DryRunAll, client.FieldValidation("Strict"))).To(Succeed(), crd.GetName())
			continue
		}
		g.Expect(env.Client.Create(ctx, crd, client.DryRunAll, client.FieldValidation("Strict"))).To(Succeed(), crd.GetName())
	}
	for name, vals := range map[string]map[string]any{
		"default": nil, "non-default": nonDefaultValues(t), "cluster issuer": clusterIssuerValues(),
		"operator certificates": operatorCertValues(),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rendered, err := render(t, vals)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rendered).NotTo(BeEmpty())
			for _, obj := range rendered {
				obj := obj.DeepCopy()
				if obj.GetNamespace() != "" {
					obj.SetNamespace(ns.Name)
				}
				err := env.Client.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
				g.Expect(err).NotTo(HaveOccurred(), "%s: %v", key(obj), apierrors.ReasonForError(err))
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func sortedKeys(m map[string]map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// readObject reads a one-object YAML file.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	obj := map[string]any{}
	NewWithT(t).Expect(yaml.Unmarshal(data, &obj)).To(Succeed())
	return &unstructured.Unstructured{Object: obj}
}

// TestDefaultInstallNeedsNoCertManager: with default values the chart renders on a cluster without cert-manager
// (the manager makes its own webhook certificate), and asking for cert-manager where it is not served fails with a
// message naming the value and the way out, not with a missing-kind error from the API server.
func TestDefaultInstallNeedsNoCertManager(t *testing.T) {
	g := NewWithT(t)
	rendered, err := renderOn(t, nil)
	g.Expect(err).NotTo(HaveOccurred())
	for _, u := range rendered {
		g.Expect(u.GetAPIVersion()).NotTo(HavePrefix("cert-manager.io/"), key(u))
		if u.GetKind() == "Deployment" {
			g.Expect(fmt.Sprint(u.Object)).To(ContainSubstring("--webhook-cert-secret"), "the manager makes its certificate")
		}
	}
	_, err = renderOn(t, map[string]any{"webhook": map[string]any{"certificates": map[string]any{"source": "cert-manager"}}})
	g.Expect(err).To(MatchError(And(ContainSubstring("webhook.certificates.source"), ContainSubstring("install cert-manager first"))))
}

// TestConventionalValues: the values Helm users expect from an operator chart reach their objects: an image by
// digest, topology spread, a PodDisruptionBudget, and the labels and interval a label-selecting Prometheus
// (kube-prometheus-stack's `release`) needs.
func TestConventionalValues(t *testing.T) {
	g := NewWithT(t)
	spread := []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
		"whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{"matchLabels": map[string]any{"control-plane": "controller-manager"}}}}
	digest := "sha256:" + strings.Repeat("ab", 32)
	rendered, err := render(t, map[string]any{
		"image":                     map[string]any{"digest": digest},
		"relatedImages":             map[string]any{"gnmic": "mirror.example/gnmic@" + digest},
		"serviceAccount":            map[string]any{"annotations": map[string]any{"iam.gke.io/gcp-service-account": "op@p.iam"}},
		"topologySpreadConstraints": spread,
		"podDisruptionBudget":       map[string]any{"enabled": true, "maxUnavailable": "50%"},
		"monitoring": map[string]any{
			"serviceMonitor":  map[string]any{"enabled": true, "labels": map[string]any{"release": "kps"}, "interval": "30s"},
			"prometheusRules": map[string]any{"enabled": true, "labels": map[string]any{"release": "kps"}},
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	d := find(rendered, "Deployment", "quartet-operator-controller-manager")
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	g.Expect(pod["containers"].([]any)[0]).To(HaveKeyWithValue("image", "ghcr.io/quartet-dev/quartet-operator@"+digest))
	g.Expect(normalized(pod["topologySpreadConstraints"])).To(Equal(normalized(spread)))
	// The images the manager starts: the stages run the manager's own image, the collectors relatedImages.gnmic.
	g.Expect(pod["containers"].([]any)[0]).To(HaveKeyWithValue("env", ContainElements(
		map[string]any{"name": "RELATED_IMAGE_KATASTROMA", "value": "ghcr.io/quartet-dev/quartet-operator@" + digest},
		map[string]any{"name": "RELATED_IMAGE_GNMIC", "value": "mirror.example/gnmic@" + digest})))
	sa := find(rendered, "ServiceAccount", "quartet-operator-controller-manager")
	g.Expect(sa).NotTo(BeNil())
	g.Expect(sa.GetAnnotations()).To(HaveKeyWithValue("iam.gke.io/gcp-service-account", "op@p.iam"))

	pdb := find(rendered, "PodDisruptionBudget", "quartet-operator-controller-manager")
	g.Expect(pdb).NotTo(BeNil())
	g.Expect(pdb.Object["spec"]).To(HaveKeyWithValue("maxUnavailable", "50%"))
	g.Expect(pdb.Object["spec"]).NotTo(HaveKey("minAvailable"))
	selector, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	for k, v := range selector {
		g.Expect(podLabels).To(HaveKeyWithValue(k, v), "the budget selects the manager's pods")
	}

	monitors, rules := 0, 0
	for _, u := range rendered {
		switch u.GetKind() {
		case "ServiceMonitor":
			monitors++
			g.Expect(u.GetLabels()).To(HaveKeyWithValue("release", "kps"), u.GetName())
			endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
			for _, e := range endpoints {
				g.Expect(e).To(HaveKeyWithValue("interval", "30s"), u.GetName())
			}
		case "PrometheusRule":
			rules++
			g.Expect(u.GetLabels()).To(HaveKeyWithValue("release", "kps"), u.GetName())
		}
	}
	// The manager's monitor; each Platform writes its own for the stages.
	g.Expect([]int{monitors, rules}).To(Equal([]int{1, 4}))

	// Without the budget value, no budget.
	rendered, err = render(t, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(find(rendered, "PodDisruptionBudget", "quartet-operator-controller-manager")).To(BeNil())
}
