package gnmicserver

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mitchellh/mapstructure"
	"github.com/openconfig/gnmic/pkg/api/types"
)

// DefaultVersion is the collector version the stand-in decodes as unless told otherwise.
const DefaultVersion = "0.47.0"

// TunnelTargetMatch is gNMIc's tunnel-target-match entry (gNMIc's config.TunnelTargetMatch): the wire keys are
// its mapstructure tags.
type TunnelTargetMatch struct {
	Type   string             `json:"type,omitempty" mapstructure:"type,omitempty"`
	ID     string             `json:"id,omitempty" mapstructure:"id,omitempty"`
	Config types.TargetConfig `json:"config,omitempty" mapstructure:"config,omitempty"`
}

// ApplyRequest is the body of POST /api/v1/config/apply as gNMIc (≥ 0.47) decodes it. The json tags only shape
// what the stand-in answers on its read endpoints; decoding goes through the mapstructure tags.
type ApplyRequest struct {
	Targets             map[string]*types.TargetConfig       `json:"targets" mapstructure:"targets"`
	Subscriptions       map[string]*types.SubscriptionConfig `json:"subscriptions" mapstructure:"subscriptions"`
	Outputs             map[string]map[string]any            `json:"outputs" mapstructure:"outputs"`
	Inputs              map[string]map[string]any            `json:"inputs" mapstructure:"inputs"`
	Processors          map[string]map[string]any            `json:"processors" mapstructure:"processors"`
	TunnelTargetMatches map[string]*TunnelTargetMatch        `json:"tunnel-target-matches" mapstructure:"tunnel-target-matches"`
}

// applyRequestBefore047 is the request struct of collectors before 0.47: the tunnel-target-matches field carries
// no mapstructure tag, so mapstructure looks for a key named like the Go field and the wire key is never used.
type applyRequestBefore047 struct {
	Targets             map[string]*types.TargetConfig       `mapstructure:"targets"`
	Subscriptions       map[string]*types.SubscriptionConfig `mapstructure:"subscriptions"`
	Outputs             map[string]map[string]any            `mapstructure:"outputs"`
	Inputs              map[string]map[string]any            `mapstructure:"inputs"`
	Processors          map[string]map[string]any            `mapstructure:"processors"`
	TunnelTargetMatches map[string]*TunnelTargetMatch
}

// Decoded is what a collector of a version makes of an apply body.
type Decoded struct {
	Request ApplyRequest
	// Unused lists every key of the body the decoder did not map onto a field, sorted, e.g.
	// "targets[lab/r1].grpc-keepalive.PermitWithoutStream". gNMIc drops these without a word; the stand-in keeps
	// them so tests can fail on them.
	Unused []string
}

// DecodeApply decodes an apply body exactly as a gNMIc collector of the given version ("0.47.0", "v0.45.1";
// empty means DefaultVersion) does: encoding/json into map[string]any, then mapstructure v1.5.0 with
// StringToTimeDurationHookFunc as the only hook. Errors carry mapstructure's text, as gNMIc returns it.
func DecodeApply(body io.Reader, version string) (*Decoded, error) {
	raw := map[string]any{}
	if err := json.NewDecoder(body).Decode(&raw); err != nil {
		return nil, err
	}
	return DecodeApplyMap(raw, version)
}

// DecodeApplyMap is DecodeApply after the JSON step.
func DecodeApplyMap(raw map[string]any, version string) (*Decoded, error) {
	before047 := !AtLeast(version, 0, 47)
	var result any = &ApplyRequest{}
	if before047 {
		result = &applyRequestBefore047{}
	}
	md := &mapstructure.Metadata{}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: mapstructure.StringToTimeDurationHookFunc(),
		Result:     result,
		// Metadata changes nothing in how values decode; it only reports the keys nothing used.
		Metadata: md,
	})
	if err != nil {
		return nil, err
	}
	if err := dec.Decode(raw); err != nil {
		return nil, err
	}
	d := &Decoded{Unused: append([]string(nil), md.Unused...)}
	sort.Strings(d.Unused)
	if old, ok := result.(*applyRequestBefore047); ok {
		d.Request = ApplyRequest{Targets: old.Targets, Subscriptions: old.Subscriptions, Outputs: old.Outputs,
			Inputs: old.Inputs, Processors: old.Processors, TunnelTargetMatches: old.TunnelTargetMatches}
	} else {
		d.Request = *result.(*ApplyRequest)
	}
	return d, nil
}

// AtLeast reports whether version (e.g. "0.47.0", "v0.47.1-rc1", "" for DefaultVersion) is at least
// major.minor. An unparsable version counts as current.
func AtLeast(version string, major, minor int) bool {
	if version == "" {
		version = DefaultVersion
	}
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}

// DecodePlugin decodes one output or processor config the way gNMIc's plugins do (mapstructure with the
// duration hook) into into, and returns the keys the plugin's config struct has no field for.
func DecodePlugin(cfg map[string]any, into any) ([]string, error) {
	md := &mapstructure.Metadata{}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: mapstructure.StringToTimeDurationHookFunc(), Result: into, Metadata: md,
	})
	if err != nil {
		return nil, err
	}
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("decoding plugin config: %w", err)
	}
	sort.Strings(md.Unused)
	return md.Unused, nil
}

// decodeTarget decodes the body of POST /api/v1/config/targets as gNMIc does.
func decodeTarget(body io.Reader, into *types.TargetConfig) ([]string, error) {
	raw := map[string]any{}
	if err := json.NewDecoder(body).Decode(&raw); err != nil {
		return nil, err
	}
	return DecodePlugin(raw, into)
}

// OutputFields holds the fields of a gNMIc output plugin's config that the operator itself writes, under the
// plugin's mapstructure keys as gNMIc's plugins (pkg/outputs/*, v0.47) declare them. Each plugin decodes its
// map with mapstructure and the duration hook, after the collector picked the plugin by "type".
type OutputFields struct {
	Address         string   `mapstructure:"address,omitempty"`
	URL             string   `mapstructure:"url,omitempty"`
	Listen          string   `mapstructure:"listen,omitempty"`
	EventProcessors []string `mapstructure:"event-processors,omitempty"`
}

// outputKeys lists, per output type, which of OutputFields the plugin's config struct has: a key the plugin
// lacks is dropped by gNMIc.
var outputKeys = map[string][]string{
	"file":             {"event-processors"},
	"kafka":            {"address", "event-processors"},
	"prometheus":       {"listen", "event-processors"},
	"prometheus_write": {"url", "event-processors"},
	"nats":             {"address", "event-processors"},
	"jetstream":        {"address", "event-processors"},
	"influxdb":         {"url", "event-processors"},
	"tcp":              {"address", "event-processors"},
	"udp":              {"address", "event-processors"},
}

// DecodeOutput decodes one output's config as its plugin does and returns the operator-written fields it
// holds, plus every operator-written key the plugin has no field for. keys are the keys the caller wrote.
func DecodeOutput(cfg map[string]any, keys []string) (*OutputFields, []string, error) {
	typ, _ := cfg["type"].(string)
	known, ok := outputKeys[typ]
	if !ok {
		return nil, nil, fmt.Errorf("unknown output type %q", typ)
	}
	sub := map[string]any{}
	var dropped []string
	for _, k := range keys {
		v, present := cfg[k]
		if !present {
			continue
		}
		if !slices.Contains(known, k) {
			dropped = append(dropped, k)
			continue
		}
		sub[k] = v
	}
	out := &OutputFields{}
	unused, err := DecodePlugin(sub, out)
	return out, append(dropped, unused...), err
}
