package targetsource

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// DefaultPort is the device port used when neither the device nor target.port gives one.
const DefaultPort = 57400

// Template holds the TargetSource's defaults for its devices.
type Template struct {
	// Source is the TargetSource name.
	Source  string
	Port    int
	Profile string
	Labels  map[string]string
}

// Desired is the owned part of one Target.
type Desired struct {
	Name        string
	Address     string
	Profile     string
	Labels      map[string]string
	Annotations map[string]string
}

// Plan is the set of Targets a run wants, and the devices that could not become one.
type Plan struct {
	Targets   []Desired
	Failures  []Failure
	Sanitized int
}

// BuildPlan turns devices into desired Targets: devices sorted by name then address, defaults, labels (template,
// then source, sanitised, then the reserved labels), naming, and duplicate names (the first by sort wins).
func BuildPlan(tpl Template, devices []Device) Plan {
	sorted := slices.Clone(devices)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Name != sorted[j].Name {
			return sorted[i].Name < sorted[j].Name
		}
		return sorted[i].Address < sorted[j].Address
	})
	port := tpl.Port
	if port == 0 {
		port = DefaultPort
	}
	var plan Plan
	seen := make(map[string]bool, len(sorted))
	for _, d := range sorted {
		address, ok := joinAddress(d.Address, d.Port, port)
		if !ok {
			plan.Failures = append(plan.Failures, Failure{Name: d.Name, Reason: ReasonMissingAddress})
			continue
		}
		profile := d.Profile
		if profile == "" {
			profile = tpl.Profile
		}
		if profile == "" || len(validation.IsDNS1123Subdomain(profile)) > 0 {
			plan.Failures = append(plan.Failures, Failure{Name: d.Name, Reason: ReasonInvalidProfile})
			continue
		}
		name := TargetName(tpl.Source, d.Name)
		if seen[name] {
			plan.Failures = append(plan.Failures, Failure{Name: d.Name, Reason: ReasonDuplicateName})
			continue
		}
		seen[name] = true
		merged := make(map[string]string, len(tpl.Labels)+len(d.Labels)+2)
		for k, v := range tpl.Labels {
			merged[k] = v
		}
		for k, v := range d.Labels {
			merged[k] = v
		}
		delete(merged, gnmicv1alpha1.LabelTargetSource)
		delete(merged, gnmicv1alpha1.LabelManagedBy)
		san := SanitizeLabels(merged, gnmicv1alpha1.AnnotationLabelPrefix)
		if san.Changed {
			plan.Sanitized++
		}
		annotations := map[string]string{gnmicv1alpha1.AnnotationDiscoveredName: d.Name}
		for k, v := range san.Annotations {
			annotations[k] = v
		}
		annotations[gnmicv1alpha1.AnnotationSourceLabels] = strings.Join(sortedKeys(san.Labels), ",")
		labels := san.Labels
		labels[gnmicv1alpha1.LabelTargetSource] = SanitizeLabelValue(tpl.Source)
		labels[gnmicv1alpha1.LabelManagedBy] = gnmicv1alpha1.ManagedByTargetSource
		plan.Targets = append(plan.Targets, Desired{
			Name: name, Address: address, Profile: profile, Labels: labels, Annotations: annotations,
		})
	}
	return plan
}

// joinAddress keeps a valid port already in address, else joins the host with the device port or the default.
func joinAddress(address string, devicePort, defaultPort int) (string, bool) {
	if host, p, err := net.SplitHostPort(address); err == nil && host != "" {
		if n, err := strconv.Atoi(p); err == nil && n >= 1 && n <= 65535 {
			if gnmicv1alpha1.ValidateAddress(address) == "" {
				return address, true
			}
			return "", false
		}
		address = host
	}
	address = strings.TrimSuffix(strings.TrimPrefix(address, "["), "]")
	port := devicePort
	if port == 0 {
		port = defaultPort
	}
	joined := net.JoinHostPort(address, strconv.Itoa(port))
	if address == "" || gnmicv1alpha1.ValidateAddress(joined) != "" {
		return "", false
	}
	return joined, true
}

// Digest is an order-independent 16-hex digest of the desired Targets.
func Digest(targets []Desired) string {
	lines := make([]string, 0, len(targets))
	for _, t := range targets {
		var b strings.Builder
		b.WriteString(t.Name + "\x00" + t.Address + "\x00" + t.Profile)
		for _, k := range sortedKeys(t.Labels) {
			b.WriteString("\x00l" + k + "=" + t.Labels[k])
		}
		for _, k := range sortedKeys(t.Annotations) {
			b.WriteString("\x00a" + k + "=" + t.Annotations[k])
		}
		lines = append(lines, b.String())
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
