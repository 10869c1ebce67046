package helmchart

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// alwaysChartOwned are flags the chart sets through its own objects rather than `config`: the ports its Services
// and probes point at, --enable-webhooks, since it always installs the webhook configurations, and the monitoring
// flags, since its monitoring.* values render the monitoring objects. --groups has
// its own value, and the --webhook-cert-secret family its webhook.certificates.source.
var alwaysChartOwned = []string{"enable-webhooks", "webhook-port", "registry-bind-address", "groups",
	"monitoring-objects", "monitoring-labels",
	"webhook-cert-secret", "webhook-service", "webhook-validating-configurations", "webhook-mutating-configurations"}

// chartOwnedFlags are the flags `config` may not set: those in the Deployment's args (an argument wins over its
// variable, so a `config` entry for them would silently do nothing) and alwaysChartOwned.
func chartOwnedFlags(deployment map[string]any) []string {
	owned := slices.Clone(alwaysChartOwned)
	containers, _ := dig(deployment, "spec", "template", "spec", "containers").([]any)
	for _, c := range containers {
		args, _ := c.(map[string]any)["args"].([]any)
		for _, a := range args {
			arg, _ := a.(string)
			flagName, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			owned = append(owned, flagName)
		}
	}
	slices.Sort(owned)
	return slices.Compact(owned)
}

// object is a JSON schema node; map keys marshal sorted, so the file is stable.
type object = map[string]any

// openObjects are values passed through to Kubernetes fields as they are; the API server validates them.
var openObjects = map[string]bool{
	"resources": true, "podSecurityContext": true, "securityContext": true, "affinity": true,
	"podAnnotations": true, "podLabels": true, "nodeSelector": true, "labels": true, "annotations": true,
}

// enums are the values with a fixed set of choices.
var enums = map[string][]string{
	"image.pullPolicy":                                {"Always", "IfNotPresent", "Never"},
	"webhook.certificates.source":                     {"cert-manager", "secret", "operator"},
	"webhook.certificates.certManager.issuerRef.kind": {"Issuer", "ClusterIssuer"},
}

// Schema is values.schema.json: the shape of values.yaml's defaults, with `config` listing every manager flag
// except the chart-owned ones, so a typo in a flag name fails `helm install` instead of the manager's start.
func Schema(values map[string]any, chartOwned []string) ([]byte, error) {
	root, err := schemaOf("", values)
	if err != nil {
		return nil, err
	}
	root["$schema"] = "https://json-schema.org/draft-07/schema#"
	root["title"] = "quartet-operator chart values"
	props := root["properties"].(object)
	props["config"] = configSchema(chartOwned)
	props["groups"] = object{"type": "array", "uniqueItems": true, "items": object{"enum": operator.Groups}}
	props["replicaCount"] = object{"type": "integer", "minimum": 0}
	props["extraEnv"] = object{"type": "array", "items": object{"type": "object", "required": []string{"name"}}}
	props["imagePullSecrets"] = object{"type": "array", "items": object{
		"type": "object", "required": []string{"name"}, "properties": object{"name": object{"type": "string"}}}}
	props["tolerations"] = object{"type": "array", "items": object{"type": "object"}}
	props["topologySpreadConstraints"] = object{"type": "array", "items": object{"type": "object"}}
	// An int or a percentage, as the PodDisruptionBudget API takes them.
	pdb := props["podDisruptionBudget"].(object)["properties"].(object)
	for _, k := range []string{"minAvailable", "maxUnavailable"} {
		pdb[k] = object{"type": []string{"integer", "string"}}
	}
	raw, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}

func schemaOf(path string, v any) (object, error) {
	if choices, ok := enums[path]; ok {
		return object{"type": "string", "enum": choices}, nil
	}
	switch v := v.(type) {
	case map[string]any:
		key := path[strings.LastIndex(path, ".")+1:]
		if openObjects[key] {
			return object{"type": "object"}, nil
		}
		props := object{}
		for k, sub := range v {
			s, err := schemaOf(strings.TrimPrefix(path+"."+k, "."), sub)
			if err != nil {
				return nil, err
			}
			props[k] = s
		}
		return object{"type": "object", "properties": props, "additionalProperties": false}, nil
	case []any:
		return object{"type": "array"}, nil
	case string:
		return object{"type": "string"}, nil
	case bool:
		return object{"type": "boolean"}, nil
	case float64, int, int64:
		return object{"type": "number"}, nil
	}
	return nil, fmt.Errorf("values.yaml: %s has a null or unsupported default (%T); give it a typed default", path, v)
}

// configSchema has one property per manager flag, typed by the flag's kind and described by its usage text.
func configSchema(chartOwned []string) object {
	c := manager.CommandLine{Options: manager.DefaultOptions()}
	props := object{}
	manager.NewFlagSet("manager", &c).VisitAll(func(f *flag.Flag) {
		if slices.Contains(chartOwned, f.Name) {
			return
		}
		p := object{"description": f.Usage}
		switch fmt.Sprintf("%T", f.Value) {
		case "*flag.boolValue":
			p["type"] = []string{"boolean", "string"}
		case "*flag.intValue", "*flag.int64Value", "*flag.uintValue":
			p["type"] = []string{"integer", "string"}
		case "*flag.float64Value":
			p["type"] = []string{"number", "string"}
		default:
			p["type"] = "string"
		}
		props[f.Name] = p
	})
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	return object{
		"type":                 "object",
		"description":          "Manager flags by name; each becomes its QUARTET_* variable. Flags set by the chart itself are not listed: " + strings.Join(chartOwned, ", ") + ".",
		"properties":           props,
		"additionalProperties": false,
	}
}
