package gnmic

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plugins"
)

// gNMIc's output plugins and event processors ignore config keys their config struct has no field for, so a
// misspelt key silently leaves the setting at its default. The webhooks warn about such keys rather than deny
// them: the key table is gNMIc's as of plugins.CurrentVersion, and a Cluster may run another release.

var outputValidator = specValidator[*gnmicv1alpha1.Output]{kind: "Output", validate: gnmicv1alpha1.ValidateOutput,
	warn: func(o *gnmicv1alpha1.Output) admission.Warnings {
		keys, ok := plugins.Output(string(o.Spec.Type), true)
		if !ok {
			return nil // an unknown type is denied by the validation
		}
		return unknownKeyWarnings(keys, o.Spec.Config, fmt.Sprintf("gNMIc's %s output", o.Spec.Type))
	}}

var processorValidator = specValidator[*gnmicv1alpha1.Processor]{kind: "Processor", validate: gnmicv1alpha1.ValidateProcessor,
	warn: func(p *gnmicv1alpha1.Processor) admission.Warnings {
		keys, ok := plugins.Processor(p.Spec.Type, true)
		if !ok {
			return nil
		}
		return unknownKeyWarnings(keys, p.Spec.Config, "gNMIc's "+p.Spec.Type+" processor")
	}}

func unknownKeyWarnings(keys plugins.Keys, raw *apiextensionsv1.JSON, plugin string) admission.Warnings {
	cfg := map[string]any{}
	if raw == nil || json.Unmarshal(raw.Raw, &cfg) != nil {
		return nil // not an object: the validation reports it
	}
	var out admission.Warnings
	for _, key := range keys.Unknown(cfg) {
		if key == "type" {
			continue // spec.config.type is denied with its own message
		}
		out = append(out, fmt.Sprintf("spec.config.%s: %s has no such setting (as of gNMIc %s) and ignores it",
			key, plugin, plugins.CurrentVersion))
	}
	return out
}
