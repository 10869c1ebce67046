// Package plan turns the Pipelines of one gNMIc collector Cluster, and the objects they select, into the
// configuration the collectors run, using gNMIc's own published config types (github.com/openconfig/gnmic/pkg/api
// /types) so field names and encodings are gNMIc's. It is pure: the controller fetches, this package decides.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"

	"github.com/openconfig/gnmic/pkg/api/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ktypes "k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// TunnelTargetMatch is gNMIc's tunnel-target-match entry: devices dialling in whose type and ID match the
// regular expressions become targets with Config.
type TunnelTargetMatch struct {
	Type   string             `json:"type,omitempty"`
	ID     string             `json:"id,omitempty"`
	Config types.TargetConfig `json:"config,omitempty"`
}

// ApplyRequest is the body of the collector's POST /api/v1/config/apply: a full declarative replace.
type ApplyRequest struct {
	Targets             map[string]*types.TargetConfig       `json:"targets"`
	Subscriptions       map[string]*types.SubscriptionConfig `json:"subscriptions"`
	Outputs             map[string]map[string]any            `json:"outputs"`
	Inputs              map[string]map[string]any            `json:"inputs"`
	Processors          map[string]map[string]any            `json:"processors"`
	TunnelTargetMatches map[string]*TunnelTargetMatch        `json:"tunnel-target-matches"`
}

// Snapshot is everything a plan is built from, as read by the controller.
type Snapshot struct {
	// Pipelines whose clusterRef names the Cluster, enabled or not.
	Pipelines []gnmicv1alpha1.Pipeline
	// Targets, Subscriptions, … are the candidates in the Pipelines' namespaces.
	Targets              []gnmicv1alpha1.Target
	Subscriptions        []gnmicv1alpha1.Subscription
	Outputs              []gnmicv1alpha1.Output
	Inputs               []gnmicv1alpha1.Input
	Processors           []gnmicv1alpha1.Processor
	TunnelTargetPolicies []gnmicv1alpha1.TunnelTargetPolicy
	// Profiles by namespace/name.
	Profiles map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile
	// Credentials holds the data of each credentials Secret by namespace/name.
	Credentials map[ktypes.NamespacedName]map[string][]byte
	// OutputAddresses holds the resolved address (host:port or URL) of outputs with serviceRef/serviceSelector.
	OutputAddresses map[ktypes.NamespacedName]string
}

// PipelineResult is what one Pipeline resolved to.
type PipelineResult struct {
	Enabled              bool
	Targets              int
	Subscriptions        int
	Outputs              int
	Inputs               int
	TunnelTargetPolicies int
	// Missing lists "Kind/name" for every ref that names no object, and missing profiles, sorted.
	Missing []string
	// Skipped lists target names left out because they have no subscription.
	Skipped []string
}

// Plan is the resolved configuration of one Cluster, before it is split over pods.
type Plan struct {
	Config    ApplyRequest
	Pipelines map[string]*PipelineResult
	// PrometheusOutputs are the prometheus outputs in use, by namespace/name: each gets a Service.
	PrometheusOutputs []ktypes.NamespacedName
}

// Name is gNMIc's name for an object: namespace/name.
func Name(namespace, name string) string { return namespace + "/" + name }

// Build resolves every enabled Pipeline of the snapshot into one plan.
func Build(s Snapshot) *Plan {
	p := &Plan{
		Config: ApplyRequest{
			Targets: map[string]*types.TargetConfig{}, Subscriptions: map[string]*types.SubscriptionConfig{},
			Outputs: map[string]map[string]any{}, Inputs: map[string]map[string]any{},
			Processors: map[string]map[string]any{}, TunnelTargetMatches: map[string]*TunnelTargetMatch{},
		},
		Pipelines: map[string]*PipelineResult{},
	}
	pipelines := slices.Clone(s.Pipelines)
	sort.Slice(pipelines, func(i, j int) bool {
		return Name(pipelines[i].Namespace, pipelines[i].Name) < Name(pipelines[j].Namespace, pipelines[j].Name)
	})
	// What each target gets from every Pipeline it is in.
	targetSubs := map[string]map[string]bool{}
	targetOuts := map[string]map[string]bool{}
	targetTags := map[string]map[string]string{}
	targetObjs := map[string]*gnmicv1alpha1.Target{}
	outputProcs := map[string][]string{}
	prom := map[ktypes.NamespacedName]bool{}

	for i := range pipelines {
		pl := &pipelines[i]
		res := &PipelineResult{Enabled: pl.Spec.Enabled}
		p.Pipelines[Name(pl.Namespace, pl.Name)] = res
		if !pl.Spec.Enabled {
			continue
		}
		ns := pl.Namespace
		targets := resolve(s.Targets, ns, pl.Spec.TargetRefs, pl.Spec.TargetSelectors, "Target", res)
		subs := resolve(s.Subscriptions, ns, pl.Spec.SubscriptionRefs, pl.Spec.SubscriptionSelectors, "Subscription", res)
		outs := resolve(s.Outputs, ns, pl.Spec.Outputs.OutputRefs, pl.Spec.Outputs.OutputSelectors, "Output", res)
		outProcs := resolve(s.Processors, ns, pl.Spec.Outputs.ProcessorRefs, pl.Spec.Outputs.ProcessorSelectors, "Processor", res)
		ins := resolve(s.Inputs, ns, pl.Spec.Inputs.InputRefs, pl.Spec.Inputs.InputSelectors, "Input", res)
		inProcs := resolve(s.Processors, ns, pl.Spec.Inputs.ProcessorRefs, pl.Spec.Inputs.ProcessorSelectors, "Processor", res)
		ttps := resolve(s.TunnelTargetPolicies, ns, pl.Spec.TunnelTargetPolicyRefs, pl.Spec.TunnelTargetPolicySelectors, "TunnelTargetPolicy", res)
		res.Subscriptions, res.Outputs, res.Inputs, res.TunnelTargetPolicies = len(subs), len(outs), len(ins), len(ttps)

		subNames := make([]string, 0, len(subs))
		for _, sub := range subs {
			name := Name(sub.Namespace, sub.Name)
			subNames = append(subNames, name)
			p.Config.Subscriptions[name] = subscriptionConfig(name, sub)
		}
		outNames := make([]string, 0, len(outs))
		procNames := func(procs []*gnmicv1alpha1.Processor) []string {
			names := make([]string, 0, len(procs))
			for _, pr := range procs {
				name := Name(pr.Namespace, pr.Name)
				names = append(names, name)
				p.Config.Processors[name] = processorConfig(pr)
			}
			return names
		}
		outProcNames := procNames(outProcs)
		for _, o := range outs {
			name := Name(o.Namespace, o.Name)
			outNames = append(outNames, name)
			outputProcs[name] = appendNew(outputProcs[name], outProcNames...)
			p.Config.Outputs[name] = outputConfig(o, s.OutputAddresses[ktypes.NamespacedName{Namespace: o.Namespace, Name: o.Name}])
			if o.Spec.Type == gnmicv1alpha1.OutputPrometheus {
				prom[ktypes.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = true
			}
		}
		inProcNames := procNames(inProcs)
		if len(outs) > 0 { // gNMIc rejects inputs without outputs
			for _, in := range ins {
				name := Name(in.Namespace, in.Name)
				cfg := inputConfig(in)
				cfg["outputs"] = sortedUnion(anyStrings(p.Config.Inputs[name]["outputs"]), outNames)
				if len(inProcNames) > 0 {
					cfg["event-processors"] = appendNew(anyStrings(p.Config.Inputs[name]["event-processors"]), inProcNames...)
				}
				p.Config.Inputs[name] = cfg
			}
		} else {
			res.Inputs = 0
		}
		for _, tp := range ttps {
			name := Name(tp.Namespace, tp.Name)
			m := &TunnelTargetMatch{}
			if tp.Spec.Match != nil {
				m.Type, m.ID = tp.Spec.Match.Type, tp.Spec.Match.ID
			}
			if tp.Spec.Profile != "" {
				if prof := s.Profiles[ktypes.NamespacedName{Namespace: ns, Name: tp.Spec.Profile}]; prof != nil {
					m.Config = profileConfig(prof, s.Credentials)
				} else {
					res.Missing = appendNew(res.Missing, "TargetProfile/"+tp.Spec.Profile)
				}
			}
			m.Config.Subscriptions = slices.Sorted(slices.Values(subNames))
			m.Config.Outputs = slices.Sorted(slices.Values(outNames))
			p.Config.TunnelTargetMatches[name] = m
		}
		for _, t := range targets {
			name := Name(t.Namespace, t.Name)
			if s.Profiles[ktypes.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Profile}] == nil {
				res.Missing = appendNew(res.Missing, "TargetProfile/"+t.Spec.Profile)
				continue
			}
			if len(subNames) == 0 {
				res.Skipped = append(res.Skipped, name)
				continue
			}
			res.Targets++
			targetObjs[name] = t
			addAll(targetSubs, name, subNames)
			addAll(targetOuts, name, outNames)
			if targetTags[name] == nil {
				targetTags[name] = map[string]string{}
			}
			maps.Copy(targetTags[name], pl.Spec.Labels)
		}
		sort.Strings(res.Missing)
	}
	for name, t := range targetObjs {
		prof := s.Profiles[ktypes.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Profile}]
		cfg := profileConfig(prof, s.Credentials)
		cfg.Name, cfg.Address = name, t.Spec.Address
		cfg.Subscriptions = slices.Sorted(maps.Keys(targetSubs[name]))
		if outs := targetOuts[name]; len(outs) > 0 {
			cfg.Outputs = slices.Sorted(maps.Keys(outs))
		}
		if tags := targetTags[name]; len(tags) > 0 {
			if cfg.EventTags == nil {
				cfg.EventTags = map[string]string{}
			}
			maps.Copy(cfg.EventTags, tags)
		}
		p.Config.Targets[name] = &cfg
	}
	for name, procs := range outputProcs {
		if len(procs) > 0 {
			p.Config.Outputs[name]["event-processors"] = procs
		}
	}
	p.PrometheusOutputs = slices.SortedFunc(maps.Keys(prom), func(a, b ktypes.NamespacedName) int {
		if a.String() < b.String() {
			return -1
		}
		if a.String() > b.String() {
			return 1
		}
		return 0
	})
	return p
}

// object is what resolve needs of an API object.
type object interface {
	GetNamespace() string
	GetName() string
	GetLabels() map[string]string
}

// resolve returns refs first (in ref order, missing ones recorded), then every object in the namespace that one
// of the selectors matches, sorted by name. An empty selector matches nothing.
func resolve[T any, PT interface {
	*T
	object
}](all []T, ns string, refs []string, selectors []metav1.LabelSelector, kind string, res *PipelineResult) []PT {
	byName := map[string]PT{}
	for i := range all {
		o := PT(&all[i])
		if o.GetNamespace() == ns {
			byName[o.GetName()] = o
		}
	}
	var out []PT
	seen := map[string]bool{}
	for _, r := range refs {
		o, ok := byName[r]
		if !ok {
			res.Missing = appendNew(res.Missing, kind+"/"+r)
			continue
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, o)
		}
	}
	var sels []labels.Selector
	for i := range selectors {
		if len(selectors[i].MatchLabels) == 0 && len(selectors[i].MatchExpressions) == 0 {
			continue // an empty selector matches nothing
		}
		sel, err := metav1.LabelSelectorAsSelector(&selectors[i])
		if err == nil {
			sels = append(sels, sel)
		}
	}
	var selected []string
	for name, o := range byName {
		if seen[name] {
			continue
		}
		for _, sel := range sels {
			if sel.Matches(labels.Set(o.GetLabels())) {
				selected = append(selected, name)
				break
			}
		}
	}
	sort.Strings(selected)
	for _, name := range selected {
		out = append(out, byName[name])
	}
	return out
}

// ForPod returns the apply request of one pod: the given targets and every other resource of the plan. Pods
// holding no targets still get subscriptions, outputs and inputs, so an output's listener exists on every pod.
func (p *Plan) ForPod(targets []string) *ApplyRequest {
	req := p.Config
	req.Targets = make(map[string]*types.TargetConfig, len(targets))
	for _, t := range targets {
		if cfg, ok := p.Config.Targets[t]; ok {
			req.Targets[t] = cfg
		}
	}
	return &req
}

// Empty is the apply request that removes everything from a collector.
func Empty() *ApplyRequest {
	return &ApplyRequest{
		Targets: map[string]*types.TargetConfig{}, Subscriptions: map[string]*types.SubscriptionConfig{},
		Outputs: map[string]map[string]any{}, Inputs: map[string]map[string]any{},
		Processors: map[string]map[string]any{}, TunnelTargetMatches: map[string]*TunnelTargetMatch{},
	}
}

// Encode returns the request's JSON (map keys sorted, so the same plan always encodes the same bytes) and its
// sha256 hex digest.
func Encode(req *ApplyRequest) ([]byte, string, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), nil
}

func addAll(m map[string]map[string]bool, key string, values []string) {
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	for _, v := range values {
		m[key][v] = true
	}
}

func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

func sortedUnion(a, b []string) []string {
	out := appendNew(slices.Clone(a), b...)
	sort.Strings(out)
	return out
}

func anyStrings(v any) []string {
	s, _ := v.([]string)
	return s
}
