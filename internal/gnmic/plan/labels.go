package plan

import (
	"fmt"
	"slices"
)

// PipelineLabelsProcessor is the name of the event-add-tag processor carrying a Pipeline's labels.
func PipelineLabelsProcessor(namespace, pipeline string) string {
	return namespace + "/" + pipeline + "/labels"
}

// addPipelineLabels gives each Pipeline's labels to that Pipeline's data alone: an event-add-tag processor whose
// condition matches only the Pipeline's subscription instances (named namespace/pipeline/subscription; gNMIc tags
// every event with its subscription-name), run first on each of the Pipeline's outputs. Target event-tags would
// tag every event of the target, whichever Pipeline it is for. An output shared by Pipelines runs the processor of
// each (every one touches only its own Pipeline's events), so sharing and output names are unaffected.
func addPipelineLabels(p *Plan, all []*resolved) {
	labelProcs := map[string][]string{}
	for _, r := range all {
		if len(r.pl.Spec.Labels) == 0 || len(r.subNames) == 0 || len(r.outNames) == 0 {
			continue
		}
		name := PipelineLabelsProcessor(r.pl.Namespace, r.pl.Name)
		add := make(map[string]any, len(r.pl.Spec.Labels))
		for k, v := range r.pl.Spec.Labels {
			add[k] = v
		}
		prefix := r.pl.Namespace + "/" + r.pl.Name + "/"
		p.Config.Processors[name] = map[string]any{"event-add-tag": map[string]any{
			"condition": fmt.Sprintf(`(.tags["subscription-name"] // "") | startswith(%q)`, prefix),
			"add":       add,
			"overwrite": true,
		}}
		for _, out := range r.outNames {
			labelProcs[out] = appendNew(labelProcs[out], name)
		}
	}
	for out, procs := range labelProcs {
		cfg := p.Config.Outputs[out]
		if cfg == nil {
			continue
		}
		slices.Sort(procs)
		cfg["event-processors"] = append(procs, anyStrings(cfg["event-processors"])...)
	}
}
