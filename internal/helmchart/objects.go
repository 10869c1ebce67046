package helmchart

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// Values conditions the templates share.
const (
	certManagerSource = `eq .Values.webhook.certificates.source "cert-manager"`
	secretSource      = `eq .Values.webhook.certificates.source "secret"`
	operatorSource    = `eq .Values.webhook.certificates.source "operator"`
)

// webhookNames are the objects the manager needs to know by name when it manages its webhook certificate itself.
type webhookNames struct {
	// Service is the Service the webhook configurations call.
	Service string
	// Validating and Mutating are the webhook configurations of each kind.
	Validating, Mutating []string
}

// findWebhookNames reads the names from the kustomize output, so the chart's flags follow config/.
func findWebhookNames(objects []map[string]any) (webhookNames, error) {
	var names webhookNames
	for _, obj := range objects {
		kind, _ := obj["kind"].(string)
		if kind != "ValidatingWebhookConfiguration" && kind != "MutatingWebhookConfiguration" {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		n, _ := meta["name"].(string)
		if kind == "ValidatingWebhookConfiguration" {
			names.Validating = append(names.Validating, n)
		} else {
			names.Mutating = append(names.Mutating, n)
		}
		webhooks, _ := obj["webhooks"].([]any)
		for _, w := range webhooks {
			svc, _ := dig(w.(map[string]any), "clientConfig", "service", "name").(string)
			if names.Service != "" && svc != names.Service {
				return names, fmt.Errorf("%s calls Service %q, others %q: the chart supports one webhook Service", name(obj), svc, names.Service)
			}
			names.Service = svc
		}
	}
	if names.Service == "" || len(names.Validating)+len(names.Mutating) == 0 {
		return names, fmt.Errorf("%s builds no webhook configuration calling a Service", KustomizeDir)
	}
	return names, nil
}

// templatize edits one object of the kustomize output into its template.
func templatize(obj map[string]any, webhooks webhookNames) (*template, error) {
	t := newTemplate(obj)
	addHelmLabels(t, obj)
	kind, _ := obj["kind"].(string)
	switch kind {
	case "Deployment":
		return t, templatizeDeployment(t, obj, webhooks)
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		return t, templatizeWebhookConfiguration(t, obj)
	case "Issuer":
		t.condition = fmt.Sprintf("and (%s) (not .Values.webhook.certificates.certManager.issuerRef.name)", certManagerSource)
	case "Certificate":
		t.condition = certManagerSource
		return t, templatizeCertificate(t, obj)
	case "NetworkPolicy":
		t.condition = ".Values.networkPolicy.enabled"
	case "ServiceMonitor":
		t.condition = ".Values.monitoring.serviceMonitor.enabled"
		// A Prometheus that selects monitors by label (kube-prometheus-stack's `release`) and its own interval.
		mapAt(mapAt(obj, "metadata"), "labels")[t.Block(withToYaml(".Values.monitoring.serviceMonitor.labels", ""))] = ""
		endpoints, _ := dig(obj, "spec", "endpoints").([]any)
		for _, e := range endpoints {
			e.(map[string]any)[t.Block(func(indent string) string {
				return lines("{{- with .Values.monitoring.serviceMonitor.interval }}", indent+"interval: {{ . }}", "{{- end }}")
			})] = ""
		}
	case "PrometheusRule":
		t.condition = ".Values.monitoring.prometheusRules.enabled"
		mapAt(mapAt(obj, "metadata"), "labels")[t.Block(withToYaml(".Values.monitoring.prometheusRules.labels", ""))] = ""
	case "ConfigMap":
		if labels, _ := dig(obj, "metadata", "labels").(map[string]any); labels["grafana_dashboard"] == "1" {
			t.condition = ".Values.monitoring.grafanaDashboards.enabled"
			// The sidecar imports dashboards from the namespaces it watches, often not the operator's.
			mapAt(obj, "metadata")["namespace"] = t.Inline("{{ .Values.monitoring.grafanaDashboards.namespace | default .Release.Namespace }}")
		}
	case "ServiceAccount":
		// Annotations such as a cloud workload identity's. The name stays: the ClusterRoleBindings and the
		// escalation guard name this ServiceAccount, so the chart neither renames it nor uses another.
		if strings.HasSuffix(name(obj), "-controller-manager") {
			mapAt(obj, "metadata")[t.Block(withToYaml(".Values.serviceAccount.annotations", "annotations"))] = ""
		}
	case "ClusterRoleBinding":
		// OpenShift's cluster Prometheus may read the metrics only when the chart is told to set monitoring up.
		if strings.HasSuffix(name(obj), "metrics-reader-prometheus") {
			t.condition = ".Values.monitoring.serviceMonitor.enabled"
		}
	}
	if g := rbacGroup(kind, name(obj)); g != "" {
		// A group's rights only when the manager runs its controllers (groups empty runs every group).
		t.condition = fmt.Sprintf(`or (not .Values.groups) (has %q .Values.groups)`, g)
	}
	return t, nil
}

// rbacGroup is the API group whose controllers need a ClusterRole or ClusterRoleBinding of config/rbac: the
// manager's per-group roles (manager-role-<group>, manager-rolebinding-<group>) and the gitops stages' shipped
// roles (katastroma-*); "" for everything else.
func rbacGroup(kind, objName string) string {
	if kind != "ClusterRole" && kind != "ClusterRoleBinding" {
		return ""
	}
	for _, g := range operator.Groups {
		if strings.HasSuffix(objName, "-manager-role-"+g) || strings.HasSuffix(objName, "-manager-rolebinding-"+g) {
			return g
		}
	}
	if kind == "ClusterRole" && strings.Contains(objName, "-katastroma-") {
		return "gitops"
	}
	return ""
}

// addHelmLabels replaces config/'s managed-by label with the chart's labels (managed-by Helm, instance, chart).
func addHelmLabels(t *template, obj map[string]any) {
	meta := mapAt(obj, "metadata")
	labels := mapAt(meta, "labels")
	delete(labels, "app.kubernetes.io/managed-by")
	labels[t.Block(func(indent string) string {
		return fmt.Sprintf("{{- include \"quartet-operator.labels\" . | nindent %d }}\n", len(indent))
	})] = ""
}

func templatizeWebhookConfiguration(t *template, obj map[string]any) error {
	annotations := mapAt(mapAt(obj, "metadata"), "annotations")
	injectFrom, ok := annotations["cert-manager.io/inject-ca-from"].(string)
	if !ok {
		return fmt.Errorf("%s has no cert-manager.io/inject-ca-from annotation (config/default's replacements)", name(obj))
	}
	delete(annotations, "cert-manager.io/inject-ca-from")
	annotations[t.Block(func(indent string) string {
		return lines("{{- if "+certManagerSource+" }}", indent+"cert-manager.io/inject-ca-from: "+injectFrom, "{{- end }}")
	})] = ""
	webhooks, _ := obj["webhooks"].([]any)
	for _, w := range webhooks {
		clientConfig := mapAt(w.(map[string]any), "clientConfig")
		clientConfig[t.Block(func(indent string) string {
			return lines("{{- if "+secretSource+" }}",
				indent+`caBundle: {{ required "webhook.certificates.caBundle is required when webhook.certificates.source is secret" .Values.webhook.certificates.caBundle }}`,
				"{{- end }}")
		})] = ""
	}
	return nil
}

func templatizeCertificate(t *template, obj map[string]any) error {
	issuerRef := mapAt(mapAt(obj, "spec"), "issuerRef")
	selfSigned, ok := issuerRef["name"].(string)
	if !ok {
		return fmt.Errorf("%s has no spec.issuerRef.name", name(obj))
	}
	ref := ".Values.webhook.certificates.certManager.issuerRef"
	issuerRef["name"] = t.Inline(fmt.Sprintf("{{ %s.name | default %q }}", ref, selfSigned))
	issuerRef["kind"] = t.Inline(fmt.Sprintf("{{ %s.kind | default \"Issuer\" }}", ref))
	// Only when given: config/ leaves it to cert-manager's default, cert-manager.io.
	issuerRef[t.Block(func(indent string) string {
		return lines("{{- with "+ref+".group }}", indent+"group: {{ . }}", "{{- end }}")
	})] = ""
	return nil
}

// templatizeDeployment puts the values into the manager's Deployment. It fails, naming the field, when
// config/manager/manager.yaml changed shape in a way the chart relies on.
func templatizeDeployment(t *template, obj map[string]any, webhooks webhookNames) error {
	spec := mapAt(obj, "spec")
	spec["replicas"] = t.Inline("{{ .Values.replicaCount }}")
	podTemplate := mapAt(spec, "template")
	podMeta := mapAt(podTemplate, "metadata")
	mapAt(podMeta, "annotations")[t.Block(withToYaml(".Values.podAnnotations", ""))] = ""
	mapAt(podMeta, "labels")[t.Block(withToYaml(".Values.podLabels", ""))] = ""

	pod := mapAt(podTemplate, "spec")
	if _, ok := pod["securityContext"]; !ok {
		return fmt.Errorf("%s: spec.template.spec.securityContext is missing", name(obj))
	}
	delete(pod, "securityContext")
	for _, field := range []struct{ key, value string }{
		{"securityContext", ".Values.podSecurityContext"},
		{"imagePullSecrets", ".Values.imagePullSecrets"},
		{"nodeSelector", ".Values.nodeSelector"},
		{"tolerations", ".Values.tolerations"},
		{"affinity", ".Values.affinity"},
		{"topologySpreadConstraints", ".Values.topologySpreadConstraints"},
	} {
		pod[t.Block(withToYaml(field.value, field.key))] = ""
	}
	pod[t.Block(func(indent string) string {
		return lines("{{- with .Values.priorityClassName }}", indent+"priorityClassName: {{ . }}", "{{- end }}")
	})] = ""

	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 {
		return fmt.Errorf("%s: expected one container, found %d", name(obj), len(containers))
	}
	container := containers[0].(map[string]any)
	container["image"] = t.Inline(`{{ include "quartet-operator.image" . }}`)
	container["imagePullPolicy"] = t.Inline("{{ .Values.image.pullPolicy }}")
	for _, key := range []string{"resources", "securityContext"} {
		if _, ok := container[key]; !ok {
			return fmt.Errorf("%s: the manager container has no %s", name(obj), key)
		}
		delete(container, key)
	}
	container[t.Block(withToYaml(".Values.resources", "resources"))] = ""
	container[t.Block(withToYaml(".Values.securityContext", "securityContext"))] = ""

	args, _ := container["args"].([]any)
	leader := slices.Index(args, any("--leader-elect"))
	if leader < 0 {
		return fmt.Errorf("%s: the manager's args have no --leader-elect", name(obj))
	}
	args[leader] = t.Inline("--leader-elect={{ .Values.leaderElection.enabled }}")
	// The chart owns the monitoring objects (monitoring.* values), so the manager does not create its own.
	container["args"] = append(args, "--monitoring-objects=false", t.Block(func(indent string) string {
		return lines("{{- with .Values.groups }}", indent+`- --groups={{ join "," . }}`, "{{- end }}")
	}), t.Block(func(indent string) string {
		return lines("{{- if "+operatorSource+" }}",
			indent+`- --webhook-cert-secret={{ include "quartet-operator.webhookSecretName" . }}`,
			indent+"- --webhook-service="+webhooks.Service,
			indent+"- --webhook-validating-configurations="+strings.Join(webhooks.Validating, ","),
			indent+"- --webhook-mutating-configurations="+strings.Join(webhooks.Mutating, ","),
			"{{- end }}")
	}))

	env, _ := container["env"].([]any)
	// The images the manager starts: the stages run the chart's manager image, the collectors relatedImages.gnmic.
	for _, e := range env {
		switch v := e.(map[string]any); v["name"] {
		case "RELATED_IMAGE_KATASTROMA":
			v["value"] = t.Inline(`{{ include "quartet-operator.image" . | quote }}`)
		case "RELATED_IMAGE_GNMIC":
			v["value"] = t.Inline(`{{ .Values.relatedImages.gnmic | quote }}`)
		}
	}
	container["env"] = append(env, t.Block(func(indent string) string {
		return lines(
			"{{- range $flag, $value := .Values.config }}",
			indent+`- name: {{ include "quartet-operator.envName" $flag }}`,
			indent+"  value: {{ $value | toString | quote }}",
			"{{- end }}",
			"{{- with .Values.extraEnv }}",
			fmt.Sprintf("{{- toYaml . | nindent %d }}", len(indent)),
			"{{- end }}")
	}))

	// With source operator the manager writes the certificate into the directory itself.
	mounts, _ := container["volumeMounts"].([]any)
	mounted := false
	for _, m := range mounts {
		if mount := m.(map[string]any); mount["name"] == "webhook-certs" {
			mount["readOnly"] = t.Inline("{{ not (" + operatorSource + ") }}")
			mounted = true
		}
	}
	if !mounted {
		return fmt.Errorf("%s: no webhook-certs volumeMount (config/default/manager_webhook_patch.yaml)", name(obj))
	}
	volumes, _ := pod["volumes"].([]any)
	for _, v := range volumes {
		volume := v.(map[string]any)
		if volume["name"] == "webhook-certs" {
			delete(volume, "secret")
			volume[t.Block(func(indent string) string {
				return lines("{{- if "+operatorSource+" }}", indent+"emptyDir: {}", "{{- else }}",
					indent+"secret:",
					indent+`  secretName: {{ include "quartet-operator.webhookSecretName" . }}`,
					"{{- end }}")
			})] = ""
			return nil
		}
	}
	return fmt.Errorf("%s: no webhook-certs volume (config/default/manager_webhook_patch.yaml)", name(obj))
}

// withToYaml renders a values field under key (or, with an empty key, into the enclosing map) when it is set.
func withToYaml(value, key string) func(indent string) string {
	return func(indent string) string {
		if key == "" {
			return lines("{{- with "+value+" }}", fmt.Sprintf("{{- toYaml . | nindent %d }}", len(indent)), "{{- end }}")
		}
		return lines("{{- with "+value+" }}", indent+key+":",
			fmt.Sprintf("{{- toYaml . | nindent %d }}", len(indent)+2), "{{- end }}")
	}
}

// mapAt returns m[key] as a map, creating it when absent or null.
func mapAt(m map[string]any, key string) map[string]any {
	if sub, ok := m[key].(map[string]any); ok {
		return sub
	}
	sub := map[string]any{}
	m[key] = sub
	return sub
}

func name(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	kind, _ := obj["kind"].(string)
	return kind + " " + n
}

// fileName is the template's file name: the kind and the name without the common prefix.
func fileName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	kind, _ := obj["kind"].(string)
	return strings.ToLower(kind) + "-" + strings.TrimPrefix(n, NamePrefix) + ".yaml"
}
