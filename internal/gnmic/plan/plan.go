// Package plan turns the Pipelines of one gNMIc collector Cluster, and the objects they select, into the
// configuration the collectors run, using gNMIc's own published config types (github.com/openconfig/gnmic/pkg/api
// /types) so field names and encodings are gNMIc's. It is pure: the controller fetches, this package decides.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/openconfig/gnmic/pkg/api/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ktypes "k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/version"
)

// TunnelTargetMatch is gNMIc's tunnel-target-match entry: devices dialling in whose type and ID match the
// regular expressions become targets with Config.
type TunnelTargetMatch struct {
	Type   string             `json:"type,omitempty" mapstructure:"type,omitempty"`
	ID     string             `json:"id,omitempty" mapstructure:"id,omitempty"`
	Config types.TargetConfig `json:"config,omitempty" mapstructure:"config,omitempty"`
}

// ApplyRequest is the body of the collector's POST /api/v1/config/apply: a full declarative replace. The wire
// keys are the mapstructure tags (see Encode).
type ApplyRequest struct {
	Targets             map[string]*types.TargetConfig       `json:"targets" mapstructure:"targets"`
	Subscriptions       map[string]*types.SubscriptionConfig `json:"subscriptions" mapstructure:"subscriptions"`
	Outputs             map[string]map[string]any            `json:"outputs" mapstructure:"outputs"`
	Inputs              map[string]map[string]any            `json:"inputs" mapstructure:"inputs"`
	Processors          map[string]map[string]any            `json:"processors" mapstructure:"processors"`
	TunnelTargetMatches map[string]*TunnelTargetMatch        `json:"tunnel-target-matches" mapstructure:"tunnel-target-matches"`
}

// Snapshot is everything a plan is built from, as read by the controller.
type Snapshot struct {
	// Pipelines whose clusterRef names the Cluster, enabled or not.
	Pipelines []gnmicv1alpha1.GnmicPipeline
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
	// PrometheusPorts are the ports prometheus output instances (by gNMIc output name) were given before, read
	// back from their Services: kept while free, so a new output never shifts the others.
	PrometheusPorts map[string]int32
	// OutputInstances are the output instances of the previous plans (the Cluster's status.outputInstances): an
	// instance whose processors did not change keeps its name (see nameOutputs).
	OutputInstances []gnmicv1alpha1.OutputInstance
	// CredentialsMissing are the TargetProfiles whose credentials Secret does not exist, with why: the
	// controller holds their targets back (HeldBack) instead of pushing them without credentials.
	CredentialsMissing map[ktypes.NamespacedName]string
	// CredentialsWithheld names the TargetProfiles whose credentials were left out of Credentials because the
	// collectors' API is plain HTTP.
	CredentialsWithheld []string
	// CollectorImage is the Cluster's collector image; its tag tells the collector version, and with it the
	// features the collectors decode.
	CollectorImage string
	// ReservedPorts are the ports the collector pods already use (REST, gNMI, tunnel): prometheus outputs must not
	// listen on them.
	ReservedPorts []int32
	// OutputAddresses holds the resolved address (host:port or URL) of outputs with serviceRef/serviceSelector.
	OutputAddresses map[ktypes.NamespacedName]string
	// ClientCert, when set, is the Cluster's client certificate (spec.clientTLS) as the collectors see it: presented
	// to every device reached over TLS whose profile names no client certificate of its own.
	ClientCert *ClientCertFiles
	// HeldBack names the TargetProfiles whose device TLS files are not in the collector pods (the object they
	// come from is missing, or the kubelet may not have written them yet), with why. Their targets and tunnel
	// matches are left out: gNMIc v0.47 crashes (nil pointer) when a subscription is applied to a target whose
	// tls-ca, tls-cert or tls-key file does not exist.
	HeldBack map[ktypes.NamespacedName]string
	// TargetTLS are the target-tls Secret keys whose files the profiles' targets use (the versioned names of
	// TargetTLSKey); a profile without an entry uses the unversioned TargetTLSFile names.
	TargetTLS TargetTLSKeys
}

// ClientCertFiles are the paths of a certificate and its key inside the collector pods (gNMIc's tls-cert and
// tls-key take file paths).
type ClientCertFiles struct {
	CertFile, KeyFile string
}

// targetConfig is profileConfig plus the Cluster's client certificate where the profile uses TLS without its own.
func (s *Snapshot) targetConfig(p *gnmicv1alpha1.TargetProfile) types.TargetConfig {
	var tlsKeys map[string]string
	if p != nil {
		tlsKeys = s.TargetTLS[ktypes.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
	}
	cfg := profileConfig(p, s.Credentials, tlsKeys)
	if f := s.ClientCert; f != nil && p != nil && p.Spec.TLS != nil && p.Spec.TLS.ClientCertRef == nil {
		cfg.TLSCert, cfg.TLSKey = ptr(f.CertFile), ptr(f.KeyFile)
	}
	return cfg
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
	// SkippedTunnelTargetPolicies lists the TunnelTargetPolicies ("ns/name") left out because the Pipeline
	// resolves no subscription: gNMIc would give their devices every subscription it knows (other Pipelines'),
	// and refuses matches in a payload without any subscription.
	SkippedTunnelTargetPolicies []string
	// NoOutputs is set when the Pipeline resolves no Output: it then collects nothing, since gNMIc would write
	// its targets' data to every output of the collector.
	NoOutputs bool
	// Unsupported lists "Kind/name: why" for every object left out because the collector cannot decode what it
	// asks for, sorted.
	Unsupported []string
}

// Plan is the resolved configuration of one Cluster, before it is split over pods.
type Plan struct {
	Config    ApplyRequest
	Pipelines map[string]*PipelineResult
	// PrometheusOutputs are the prometheus output instances in use, sorted by gNMIc name: each gets a Service.
	PrometheusOutputs []PrometheusOutput
	// OutputInstances are the plan's outputs to record for the next plans (Snapshot.OutputInstances), sorted by name.
	OutputInstances []gnmicv1alpha1.OutputInstance
}

// PrometheusOutput is one prometheus output instance of a plan.
type PrometheusOutput struct {
	// Name is the gNMIc output name (namespace/output, or namespace/pipeline/output when split).
	Name string
	// Output is the Output object it comes from.
	Output ktypes.NamespacedName
	// Port is the port it listens on in every collector pod.
	Port int32
}

// Name is gNMIc's name for an object: namespace/name.
func Name(namespace, name string) string { return namespace + "/" + name }

// resolved is what one enabled Pipeline selects.
type resolved struct {
	pl                 *gnmicv1alpha1.GnmicPipeline
	res                *PipelineResult
	targets            []*gnmicv1alpha1.Target
	subs               []*gnmicv1alpha1.Subscription
	outs               []*gnmicv1alpha1.Output
	outProcs, inProcs  []string
	outProcObjs        []*gnmicv1alpha1.Processor
	inProcObjs         []*gnmicv1alpha1.Processor
	ins                []*gnmicv1alpha1.Input
	ttps               []*gnmicv1alpha1.TunnelTargetPolicy
	outNames, subNames []string
}

// SubscriptionName is gNMIc's name for a Subscription as used by one Pipeline. Each Pipeline gets its own
// instance of a Subscription, naming that Pipeline's outputs: gNMIc sends a subscription's updates to the
// subscription's outputs, so a Target in several Pipelines still feeds each Pipeline's outputs only with that
// Pipeline's subscriptions.
func SubscriptionName(namespace, pipeline, subscription string) string {
	return pipelineScoped(namespace, pipeline, subscription)
}

// pipelineScoped is gNMIc's name for an object as used by one Pipeline: namespace/pipeline/name (Kubernetes names
// hold no "/", so it cannot clash with a namespace/name).
func pipelineScoped(namespace, pipeline, name string) string {
	return namespace + "/" + pipeline + "/" + name
}

// Build resolves every enabled Pipeline of the snapshot into one plan.
//
// Routing (see docs/gnmic.md): every subscription instance names its Pipeline's outputs, so data goes only where
// its Pipeline says; a Pipeline without outputs emits nothing for its targets (gNMIc writes a target without
// outputs to every output). An Output shared by Pipelines with different output processors is emitted once per
// Pipeline (namespace/pipeline/output), so each Pipeline's processors apply only to its own data; the names are
// kept across plans through Snapshot.OutputInstances (see nameOutputs).
func Build(s Snapshot) *Plan {
	p := &Plan{Config: *Empty(), Pipelines: map[string]*PipelineResult{}}
	pipelines := slices.Clone(s.Pipelines)
	sort.Slice(pipelines, func(i, j int) bool {
		return Name(pipelines[i].Namespace, pipelines[i].Name) < Name(pipelines[j].Namespace, pipelines[j].Name)
	})
	var all []*resolved
	for i := range pipelines {
		pl := &pipelines[i]
		res := &PipelineResult{Enabled: pl.Spec.Enabled}
		p.Pipelines[Name(pl.Namespace, pl.Name)] = res
		if !pl.Spec.Enabled {
			continue
		}
		r := resolvePipeline(s, pl, res)
		all = append(all, r)
	}
	// An Output whose Pipelines disagree on processors is split, under names kept across plans.
	outNames, instances := nameOutputs(all, s.OutputInstances)
	p.OutputInstances = instances
	targetSubs := map[string]map[string]bool{}
	targetOuts := map[string]map[string]bool{}
	targetObjs := map[string]*gnmicv1alpha1.Target{}
	prom := map[string]PrometheusOutput{}
	for _, r := range all {
		pl, res := r.pl, r.res
		for _, o := range r.outs {
			name := outNames[useKey{pipeline: Name(pl.Namespace, pl.Name), output: Name(o.Namespace, o.Name)}]
			r.outNames = append(r.outNames, name)
			cfg := outputConfig(o, s.OutputAddresses[ktypes.NamespacedName{Namespace: o.Namespace, Name: o.Name}])
			if len(r.outProcs) > 0 {
				cfg["event-processors"] = slices.Clone(r.outProcs)
			}
			p.Config.Outputs[name] = cfg
			if o.Spec.Type == gnmicv1alpha1.OutputPrometheus {
				prom[name] = PrometheusOutput{Name: name, Output: ktypes.NamespacedName{Namespace: o.Namespace, Name: o.Name}}
			}
		}
		slices.Sort(r.outNames)
		if len(r.outs) == 0 {
			// Nothing to deliver to: no subscription, no target, no tunnel match, no input of this Pipeline.
			res.NoOutputs = true
			res.Inputs = 0
			continue
		}
		for _, pr := range append(slices.Clone(r.outProcObjs), r.inProcObjs...) {
			p.Config.Processors[Name(pr.Namespace, pr.Name)] = processorConfig(pr)
		}
		for _, sub := range r.subs {
			name := SubscriptionName(sub.Namespace, pl.Name, sub.Name)
			cfg := subscriptionConfig(name, sub)
			cfg.Outputs = slices.Clone(r.outNames)
			p.Config.Subscriptions[name] = cfg
			r.subNames = append(r.subNames, name)
		}
		slices.Sort(r.subNames)
		for _, in := range r.ins {
			name := Name(in.Namespace, in.Name)
			cfg := inputConfig(in)
			cfg["outputs"] = sortedUnion(anyStrings(p.Config.Inputs[name]["outputs"]), r.outNames)
			if len(r.inProcs) > 0 {
				cfg["event-processors"] = appendNew(anyStrings(p.Config.Inputs[name]["event-processors"]), r.inProcs...)
			}
			p.Config.Inputs[name] = cfg
		}
		for _, tp := range r.ttps {
			name := Name(tp.Namespace, tp.Name)
			if len(r.subNames) == 0 {
				// A tunnel match travels only with its own Pipeline's subscriptions and outputs.
				res.SkippedTunnelTargetPolicies = appendNew(res.SkippedTunnelTargetPolicies, name)
				continue
			}
			m := p.Config.TunnelTargetMatches[name]
			if m == nil {
				m = &TunnelTargetMatch{}
				if tp.Spec.Match != nil {
					m.Type, m.ID = tp.Spec.Match.Type, tp.Spec.Match.ID
				}
				if tp.Spec.Profile != "" {
					if _, held := s.HeldBack[ktypes.NamespacedName{Namespace: tp.Namespace, Name: tp.Spec.Profile}]; held {
						continue
					}
					if prof := s.Profiles[ktypes.NamespacedName{Namespace: tp.Namespace, Name: tp.Spec.Profile}]; prof != nil {
						m.Config = s.targetConfig(prof)
					} else {
						res.Missing = appendNew(res.Missing, "TargetProfile/"+tp.Spec.Profile)
					}
				}
				p.Config.TunnelTargetMatches[name] = m
			}
			// Each subscription instance names its outputs, so a match in several Pipelines may hold them all.
			m.Config.Subscriptions = sortedUnion(m.Config.Subscriptions, r.subNames)
			m.Config.Outputs = sortedUnion(m.Config.Outputs, r.outNames)
		}
		for _, t := range r.targets {
			name := Name(t.Namespace, t.Name)
			if s.Profiles[ktypes.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Profile}] == nil {
				res.Missing = appendNew(res.Missing, "TargetProfile/"+t.Spec.Profile)
				continue
			}
			if _, held := s.HeldBack[ktypes.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Profile}]; held {
				continue
			}
			if len(r.subNames) == 0 {
				res.Skipped = append(res.Skipped, name)
				continue
			}
			res.Targets++
			targetObjs[name] = t
			addAll(targetSubs, name, r.subNames)
			addAll(targetOuts, name, r.outNames)
		}
		sort.Strings(res.Missing)
	}
	addPipelineLabels(p, all)
	for name, t := range targetObjs {
		prof := s.Profiles[ktypes.NamespacedName{Namespace: t.Namespace, Name: t.Spec.Profile}]
		cfg := s.targetConfig(prof)
		cfg.Name, cfg.Address = name, t.Spec.Address
		cfg.Subscriptions = slices.Sorted(maps.Keys(targetSubs[name]))
		// The union of the target's outputs; routing itself is per subscription, which overrides it.
		cfg.Outputs = slices.Sorted(maps.Keys(targetOuts[name]))
		p.Config.Targets[name] = &cfg
	}
	for _, name := range slices.Sorted(maps.Keys(prom)) {
		p.PrometheusOutputs = append(p.PrometheusOutputs, prom[name])
	}
	p.assignPrometheusPorts(s.ReservedPorts, s.PrometheusPorts)
	return p
}

// resolvePipeline resolves the objects one enabled Pipeline selects and records counts, missing references and
// Subscriptions no collector can take.
func resolvePipeline(s Snapshot, pl *gnmicv1alpha1.GnmicPipeline, res *PipelineResult) *resolved {
	ns := pl.Namespace
	r := &resolved{pl: pl, res: res}
	r.targets = resolve(s.Targets, ns, pl.Spec.TargetRefs, pl.Spec.TargetSelectors, "Target", res)
	subs := resolve(s.Subscriptions, ns, pl.Spec.SubscriptionRefs, pl.Spec.SubscriptionSelectors, "Subscription", res)
	r.outs = resolve(s.Outputs, ns, pl.Spec.Outputs.OutputRefs, pl.Spec.Outputs.OutputSelectors, "Output", res)
	r.outProcObjs = resolve(s.Processors, ns, pl.Spec.Outputs.ProcessorRefs, pl.Spec.Outputs.ProcessorSelectors, "Processor", res)
	r.ins = resolve(s.Inputs, ns, pl.Spec.Inputs.InputRefs, pl.Spec.Inputs.InputSelectors, "Input", res)
	r.inProcObjs = resolve(s.Processors, ns, pl.Spec.Inputs.ProcessorRefs, pl.Spec.Inputs.ProcessorSelectors, "Processor", res)
	for _, pr := range r.outProcObjs {
		r.outProcs = append(r.outProcs, Name(pr.Namespace, pr.Name))
	}
	for _, pr := range r.inProcObjs {
		r.inProcs = append(r.inProcs, Name(pr.Namespace, pr.Name))
	}
	r.ttps = resolve(s.TunnelTargetPolicies, ns, pl.Spec.TunnelTargetPolicyRefs, pl.Spec.TunnelTargetPolicySelectors, "TunnelTargetPolicy", res)
	if why := version.Compare(s.CollectorImage, version.Feature{Name: "tunnel target policies", Since: version.TunnelTargetMatches}); why != "" {
		// Sent to an older collector the matches would be dropped without a word; leave them out and say so.
		for _, tp := range r.ttps {
			res.Unsupported = appendNew(res.Unsupported, "TunnelTargetPolicy/"+tp.Name+": "+why)
		}
		r.ttps = nil
	}
	// A policy stored before admission refused catch-all matches would admit every device that dials in (and
	// send it the profile's credentials): leave it out until it names its devices.
	r.ttps = slices.DeleteFunc(r.ttps, func(tp *gnmicv1alpha1.TunnelTargetPolicy) bool {
		if errs := gnmicv1alpha1.ValidateTunnelTargetPolicy(tp); len(errs) > 0 {
			res.Unsupported = appendNew(res.Unsupported, "TunnelTargetPolicy/"+tp.Name+": "+errs.ToAggregate().Error())
			return true
		}
		return false
	})
	for _, sub := range subs {
		if why := undeliverable(sub); why != "" {
			res.Unsupported = appendNew(res.Unsupported, "Subscription/"+sub.Name+": "+why)
			continue
		}
		r.subs = append(r.subs, sub)
	}
	sort.Strings(res.Unsupported)
	res.Subscriptions, res.Outputs, res.Inputs, res.TunnelTargetPolicies = len(r.subs), len(r.outs), len(r.ins), len(r.ttps)
	return r
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

// Encode returns the request's JSON as a gNMIc collector decodes it (keys from the mapstructure tags, durations
// as strings; map keys sorted, so the same plan always encodes the same bytes) and its sha256 hex digest.
func Encode(req *ApplyRequest) ([]byte, string, error) {
	wire, err := toWire(reflect.ValueOf(req), "")
	if err != nil {
		return nil, "", err
	}
	data, err := json.Marshal(wire)
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
