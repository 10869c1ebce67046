package v1alpha1

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateCluster returns every problem with a Cluster's spec: image, replicas, ports and TLS settings.
func ValidateCluster(c *Cluster) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	// Empty runs the operator's default image (--gnmic-default-image); blanks are a mistake, not a choice.
	if strings.ContainsAny(c.Spec.Image, " \t\n") {
		errs = append(errs, field.Invalid(spec.Child("image"), c.Spec.Image,
			"must not contain whitespace (leave it empty for the operator's default image)"))
	}
	if c.Spec.Replicas != nil && *c.Spec.Replicas < 1 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *c.Spec.Replicas, "must be at least 1"))
	}
	if api := c.Spec.API; api != nil {
		errs = append(errs, validPort(spec.Child("api", "restPort"), api.RestPort, true)...)
		errs = append(errs, validPort(spec.Child("api", "gnmiPort"), api.GNMIPort, true)...)
		if api.GNMIPort != 0 && api.GNMIPort == c.RestPort() {
			errs = append(errs, field.Invalid(spec.Child("api", "gnmiPort"), api.GNMIPort, "must differ from restPort"))
		}
		errs = append(errs, validateClusterTLS(spec.Child("api", "tls"), api.TLS)...)
		if api.PlainHTTP && api.TLS != nil {
			errs = append(errs, field.Invalid(spec.Child("api", "plainHTTP"), true, "opts out of TLS, so spec.api.tls must be unset"))
		}
	}
	errs = append(errs, validateClusterTLS(spec.Child("clientTLS"), c.Spec.ClientTLS)...)
	if t := c.Spec.GRPCTunnel; t != nil {
		errs = append(errs, validPort(spec.Child("grpcTunnel", "port"), t.Port, false)...)
		if t.Port == c.RestPort() || (c.Spec.API != nil && t.Port == c.Spec.API.GNMIPort) {
			errs = append(errs, field.Invalid(spec.Child("grpcTunnel", "port"), t.Port, "must differ from restPort and gnmiPort"))
		}
		errs = append(errs, validateClusterTLS(spec.Child("grpcTunnel", "tls"), t.TLS)...)
		if t.ClientCARef != nil && t.TLS == nil {
			errs = append(errs, field.Required(spec.Child("grpcTunnel", "tls"),
				"clientCARef verifies devices' client certificates, which needs the tunnel served over TLS"))
		}
		if r := t.ClientCARef; r != nil {
			errs = append(errs, validName(spec.Child("grpcTunnel", "clientCARef", "name"), r.Name, false)...)
		}
	}
	if d := c.Spec.TargetDistribution; d != nil && d.PodCapacity != nil && *d.PodCapacity < 1 {
		errs = append(errs, field.Invalid(spec.Child("targetDistribution", "podCapacity"), *d.PodCapacity, "must be at least 1"))
	}
	if d := c.Spec.TargetDistribution; d != nil && d.UnreadyGracePeriod != nil && d.UnreadyGracePeriod.Duration < 0 {
		errs = append(errs, field.Invalid(spec.Child("targetDistribution", "unreadyGracePeriod"), d.UnreadyGracePeriod.Duration.String(),
			"must not be negative"))
	}
	return errs
}

func validPort(path *field.Path, port int32, optional bool) field.ErrorList {
	if optional && port == 0 {
		return nil
	}
	if port < 1 || port > 65535 {
		return field.ErrorList{field.Invalid(path, port, "must be a port from 1 to 65535")}
	}
	return nil
}

// validateClusterTLS admits operator-managed certificates ({}) and cert-manager ones (issuerRef) for the REST API,
// the gRPC tunnel server and the collectors' client certificate. A CA bundle and the CSI driver are refused: the
// operator trusts exactly the CA that issued the collectors' certificate (its own, or the ca.crt cert-manager
// writes), and a CSI volume would give it no Secret to read that CA or fingerprint from.
func validateClusterTLS(path *field.Path, t *ClusterTLS) field.ErrorList {
	if t == nil {
		return nil
	}
	const why = "not supported; leave it unset: the certificates come from the per-Cluster CA, or from issuerRef through a cert-manager Certificate"
	var errs field.ErrorList
	if t.IssuerRef != nil && t.IssuerRef.Name == "" {
		errs = append(errs, field.Required(path.Child("issuerRef", "name"), "the cert-manager issuer's name"))
	}
	if t.BundleRef != "" {
		errs = append(errs, field.Forbidden(path.Child("bundleRef"), "a CA bundle is "+why))
	}
	if t.UseCSIDriver {
		errs = append(errs, field.Forbidden(path.Child("useCSIDriver"), "the cert-manager CSI driver is "+why))
	}
	return errs
}

// ValidatePipeline checks the cluster reference, every ref name and every label selector.
func ValidatePipeline(p *GnmicPipeline) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, validName(spec.Child("clusterRef"), p.Spec.ClusterRef, true)...)
	errs = append(errs, validRefs(spec.Child("targetRefs"), p.Spec.TargetRefs)...)
	errs = append(errs, validSelectors(spec.Child("targetSelectors"), p.Spec.TargetSelectors)...)
	errs = append(errs, validRefs(spec.Child("tunnelTargetPolicyRefs"), p.Spec.TunnelTargetPolicyRefs)...)
	errs = append(errs, validSelectors(spec.Child("tunnelTargetPolicySelectors"), p.Spec.TunnelTargetPolicySelectors)...)
	errs = append(errs, validRefs(spec.Child("subscriptionRefs"), p.Spec.SubscriptionRefs)...)
	errs = append(errs, validSelectors(spec.Child("subscriptionSelectors"), p.Spec.SubscriptionSelectors)...)
	out, in := spec.Child("outputs"), spec.Child("inputs")
	errs = append(errs, validRefs(out.Child("outputRefs"), p.Spec.Outputs.OutputRefs)...)
	errs = append(errs, validSelectors(out.Child("outputSelectors"), p.Spec.Outputs.OutputSelectors)...)
	errs = append(errs, validRefs(out.Child("processorRefs"), p.Spec.Outputs.ProcessorRefs)...)
	errs = append(errs, validSelectors(out.Child("processorSelectors"), p.Spec.Outputs.ProcessorSelectors)...)
	errs = append(errs, validRefs(in.Child("inputRefs"), p.Spec.Inputs.InputRefs)...)
	errs = append(errs, validSelectors(in.Child("inputSelectors"), p.Spec.Inputs.InputSelectors)...)
	errs = append(errs, validRefs(in.Child("processorRefs"), p.Spec.Inputs.ProcessorRefs)...)
	errs = append(errs, validSelectors(in.Child("processorSelectors"), p.Spec.Inputs.ProcessorSelectors)...)
	for k, v := range p.Spec.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(spec.Child("labels").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(spec.Child("labels").Key(k), v, msg))
		}
	}
	return errs
}

func validName(path *field.Path, name string, required bool) field.ErrorList {
	if name == "" {
		if required {
			return field.ErrorList{field.Required(path, "a name in the same namespace")}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validRefs(path *field.Path, refs []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, r := range refs {
		if r == "" {
			errs = append(errs, field.Required(path.Index(i), "a name in the same namespace"))
			continue
		}
		errs = append(errs, validName(path.Index(i), r, true)...)
		if seen[r] {
			errs = append(errs, field.Duplicate(path.Index(i), r))
		}
		seen[r] = true
	}
	return errs
}

func validSelectors(path *field.Path, selectors []metav1.LabelSelector) field.ErrorList {
	var errs field.ErrorList
	for i := range selectors {
		if _, err := metav1.LabelSelectorAsSelector(&selectors[i]); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), selectors[i].String(), err.Error()))
		}
	}
	return errs
}

// ValidateSubscription checks mode, paths, stream subscriptions and intervals.
func ValidateSubscription(s *Subscription) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	mode := s.Spec.Mode
	if mode == "" {
		mode = SubscriptionModeStream
	}
	known := false
	for _, m := range SubscriptionModes {
		if strings.EqualFold(string(m), string(mode)) {
			known = true
		}
	}
	if !known {
		errs = append(errs, field.NotSupported(spec.Child("mode"), s.Spec.Mode, SubscriptionModes))
	}
	top, stream := SplitMode(mode)
	if len(s.Spec.StreamSubscriptions) > 0 {
		if top != "STREAM" || stream != "" {
			errs = append(errs, field.Invalid(spec.Child("streamSubscriptions"), len(s.Spec.StreamSubscriptions),
				"only allowed with mode STREAM"))
		}
		if len(s.Spec.Paths) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("paths"), "paths and streamSubscriptions are exclusive"))
		}
	} else if len(s.Spec.Paths) == 0 {
		errs = append(errs, field.Required(spec.Child("paths"), "at least one path (or streamSubscriptions)"))
	}
	for i, p := range s.Spec.Paths {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, field.Required(spec.Child("paths").Index(i), "a gNMI path"))
		}
	}
	errs = append(errs, positiveDuration(spec.Child("sampleInterval"), s.Spec.SampleInterval)...)
	errs = append(errs, positiveDuration(spec.Child("heartbeatInterval"), s.Spec.HeartbeatInterval)...)
	if s.Spec.SampleInterval != nil && known && (top != "STREAM" || (stream != "" && stream != "SAMPLE")) {
		errs = append(errs, field.Invalid(spec.Child("sampleInterval"), s.Spec.SampleInterval.Duration.String(),
			"only allowed with mode STREAM or STREAM/SAMPLE"))
	}
	for i, ss := range s.Spec.StreamSubscriptions {
		p := spec.Child("streamSubscriptions").Index(i)
		if len(ss.Paths) == 0 {
			errs = append(errs, field.Required(p.Child("paths"), "at least one path"))
		}
		switch ss.Mode {
		case "", "SAMPLE", "ON_CHANGE", "TARGET_DEFINED":
		default:
			errs = append(errs, field.NotSupported(p.Child("mode"), ss.Mode, []string{"SAMPLE", "ON_CHANGE", "TARGET_DEFINED"}))
		}
		errs = append(errs, positiveDuration(p.Child("sampleInterval"), ss.SampleInterval)...)
		errs = append(errs, positiveDuration(p.Child("heartbeatInterval"), ss.HeartbeatInterval)...)
	}
	if s.Spec.QoS != nil && *s.Spec.QoS > 63 {
		errs = append(errs, field.Invalid(spec.Child("qos"), *s.Spec.QoS, "DSCP must be 0-63"))
	}
	if h := s.Spec.History; h != nil {
		if h.Snapshot != nil && (h.Start != nil || h.End != nil) {
			errs = append(errs, field.Forbidden(spec.Child("history"), "snapshot and start/end are exclusive"))
		}
		if h.Start != nil && h.End != nil && h.End.Before(h.Start) {
			errs = append(errs, field.Invalid(spec.Child("history", "end"), h.End.String(), "must not be before start"))
		}
	}
	return errs
}

// SplitMode splits a subscription mode like "STREAM/SAMPLE" into its upper-cased mode and stream mode.
func SplitMode(m SubscriptionMode) (mode, streamMode string) {
	mode, streamMode, _ = strings.Cut(strings.ToUpper(string(m)), "/")
	return mode, streamMode
}

// ValidateOutput checks the type, the config object and the per-type address resolution rules.
func ValidateOutput(o *Output) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	known := false
	for _, t := range OutputTypes {
		known = known || t == o.Spec.Type
	}
	if !known {
		errs = append(errs, field.NotSupported(spec.Child("type"), o.Spec.Type, OutputTypes))
	}
	cfg, cfgErrs := ConfigObject(spec.Child("config"), o.Spec.Config)
	errs = append(errs, cfgErrs...)
	if _, ok := cfg["type"]; ok {
		errs = append(errs, field.Forbidden(spec.Child("config", "type"), "set spec.type instead"))
	}
	if o.Spec.Service != nil && o.Spec.Type != OutputPrometheus {
		errs = append(errs, field.Forbidden(spec.Child("service"), "only prometheus outputs get a Service"))
	}
	key, _, resolvable := OutputAddressKey(o.Spec.Type)
	ref, sel := o.Spec.ServiceRef, o.Spec.ServiceSelector
	if (ref != nil || sel != nil) && known && !resolvable {
		errs = append(errs, field.Forbidden(spec.Child("serviceRef"),
			fmt.Sprintf("address resolution is only supported for nats, jetstream, kafka, prometheus_write and influxdb, not %s", o.Spec.Type)))
	}
	if ref != nil && sel != nil {
		errs = append(errs, field.Forbidden(spec.Child("serviceSelector"), "serviceRef and serviceSelector are exclusive"))
	}
	if (ref != nil || sel != nil) && resolvable {
		if _, ok := cfg[key]; ok {
			errs = append(errs, field.Forbidden(spec.Child("config", key),
				fmt.Sprintf("%s is resolved from the service; do not set it as well", key)))
		}
	}
	if ref != nil {
		p := spec.Child("serviceRef")
		switch {
		case ref.URL != "" && (ref.Name != "" || ref.Port != ""):
			errs = append(errs, field.Forbidden(p.Child("url"), "url and name/port are exclusive"))
		case ref.URL != "":
			if u, err := url.Parse(ref.URL); err != nil || u.Host == "" {
				errs = append(errs, field.Invalid(p.Child("url"), ref.URL, "must be an absolute URL"))
			}
		default:
			errs = append(errs, validName(p.Child("name"), ref.Name, true)...)
			errs = append(errs, validServicePort(p.Child("port"), ref.Port)...)
		}
		errs = append(errs, validNamespace(p.Child("namespace"), ref.Namespace)...)
	}
	if sel != nil {
		p := spec.Child("serviceSelector")
		if len(sel.MatchLabels) == 0 {
			errs = append(errs, field.Required(p.Child("matchLabels"), "at least one label"))
		}
		if _, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: sel.MatchLabels}); err != nil {
			errs = append(errs, field.Invalid(p.Child("matchLabels"), sel.MatchLabels, err.Error()))
		}
		errs = append(errs, validServicePort(p.Child("port"), sel.Port)...)
		errs = append(errs, validNamespace(p.Child("namespace"), sel.Namespace)...)
	}
	return errs
}

func validNamespace(path *field.Path, ns string) field.ErrorList {
	var errs field.ErrorList
	if ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(path, ns, msg))
		}
	}
	return errs
}

func validServicePort(path *field.Path, port string) field.ErrorList {
	if port == "" {
		return field.ErrorList{field.Required(path, "a port number or name")}
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 1 || n > 65535 {
			return field.ErrorList{field.Invalid(path, port, "must be a port from 1 to 65535")}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortName(port) {
		errs = append(errs, field.Invalid(path, port, msg))
	}
	return errs
}

// ConfigObject decodes a schemaless config; it must be a JSON object.
func ConfigObject(path *field.Path, raw *apiextensionsv1.JSON) (map[string]any, field.ErrorList) {
	m := map[string]any{}
	if raw == nil || len(raw.Raw) == 0 || string(raw.Raw) == "null" {
		return m, nil
	}
	data := raw.Raw
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, field.ErrorList{field.Invalid(path, string(data), "must be a JSON object")}
	}
	return m, nil
}

// ValidateInput checks the type and the config object.
func ValidateInput(in *Input) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch in.Spec.Type {
	case "kafka", "nats", "jetstream":
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), in.Spec.Type, []string{"kafka", "nats", "jetstream"}))
	}
	cfg, cfgErrs := ConfigObject(spec.Child("config"), in.Spec.Config)
	errs = append(errs, cfgErrs...)
	if _, ok := cfg["type"]; ok {
		errs = append(errs, field.Forbidden(spec.Child("config", "type"), "set spec.type instead"))
	}
	return errs
}

var processorType = regexp.MustCompile(`^event-[a-z0-9-]+$`)

// ProcessorTypes are the event processors gNMIc collectors (0.45–0.47) register; a collector fails to set up a
// processor of any other type.
var ProcessorTypes = []string{"event-add-tag", "event-allow", "event-combine", "event-convert", "event-data-convert",
	"event-date-string", "event-delete", "event-drop", "event-duration-convert", "event-extract-tags",
	"event-group-by", "event-ieeefloat32", "event-jq", "event-merge", "event-override-ts", "event-rate-limit",
	"event-starlark", "event-strings", "event-time-epoch", "event-to-tag", "event-trigger", "event-value-tag",
	"event-value-tag-v2", "event-write"}

// ValidateProcessor checks the event processor type and the config object.
func ValidateProcessor(p *Processor) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if !processorType.MatchString(p.Spec.Type) {
		errs = append(errs, field.Invalid(spec.Child("type"), p.Spec.Type, "must be a gNMIc event processor type such as event-strings"))
	} else if !slices.Contains(ProcessorTypes, p.Spec.Type) {
		errs = append(errs, field.NotSupported(spec.Child("type"), p.Spec.Type, ProcessorTypes))
	}
	_, cfgErrs := ConfigObject(spec.Child("config"), p.Spec.Config)
	return append(errs, cfgErrs...)
}

// ValidateTunnelTargetPolicy checks that the match expressions compile and the profile is a name.
func ValidateTunnelTargetPolicy(t *TunnelTargetPolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	// The tunnel server builds a target, and sends it the profile's credentials, for every peer whose ID a
	// policy matches: a policy must name the devices it admits, not every device that dials in.
	const everyDevice = "would admit every device that dials into the tunnel: name the devices' IDs (e.g. ^leaf[0-9]+$)"
	if m := t.Spec.Match; m == nil {
		errs = append(errs, field.Required(spec.Child("match"), "without match the policy "+everyDevice))
	} else {
		errs = append(errs, validateTunnelMatch(spec.Child("match"), m, everyDevice)...)
	}
	return append(errs, validName(spec.Child("profile"), t.Spec.Profile, false)...)
}

func validateTunnelMatch(path *field.Path, m *TunnelTargetMatch, everyDevice string) field.ErrorList {
	var errs field.ErrorList
	if _, err := regexp.Compile(m.Type); err != nil {
		errs = append(errs, field.Invalid(path.Child("type"), m.Type, "must be a regular expression: "+err.Error()))
	}
	switch re, err := regexp.Compile(m.ID); {
	case err != nil:
		errs = append(errs, field.Invalid(path.Child("id"), m.ID, "must be a regular expression: "+err.Error()))
	case m.ID == "":
		errs = append(errs, field.Required(path.Child("id"), "an empty ID expression "+everyDevice))
	case re.MatchString(""):
		// An expression that matches the empty string matches somewhere in every ID (unanchored search).
		errs = append(errs, field.Invalid(path.Child("id"), m.ID, "matches the empty string, so it "+everyDevice))
	}
	return errs
}
