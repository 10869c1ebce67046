package gnmicserver

import (
	"encoding/json"
	"fmt"
	"io"
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
	// them so tests can fail on them. Keys of an output or processor config the plugin has no field for are
	// listed too, e.g. "outputs[lab/o].addr", "processors[lab/p].event-strings.value-name".
	Unused []string
	// Outputs and Processors are what each plugin makes of its config (plugins.go), by name.
	Outputs, Processors map[string]*Plugin
	// PluginErrors lists, sorted, the configs a plugin refuses, with mapstructure's text. The collector accepts
	// the apply all the same (it stores the config and starts the plugins afterwards); the plugin then fails to
	// start, and telemetry for it goes nowhere.
	PluginErrors []string
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
	if old, ok := result.(*applyRequestBefore047); ok {
		d.Request = ApplyRequest{Targets: old.Targets, Subscriptions: old.Subscriptions, Outputs: old.Outputs,
			Inputs: old.Inputs, Processors: old.Processors, TunnelTargetMatches: old.TunnelTargetMatches}
	} else {
		d.Request = *result.(*ApplyRequest)
	}
	d.decodePlugins(version)
	sort.Strings(d.Unused)
	return d, nil
}

// decodePlugins runs every output's and processor's config through its plugin's decoder.
func (d *Decoded) decodePlugins(version string) {
	d.Outputs, d.Processors = map[string]*Plugin{}, map[string]*Plugin{}
	for kind, entries := range map[string]map[string]map[string]any{"outputs": d.Request.Outputs, "processors": d.Request.Processors} {
		for name, cfg := range entries {
			var p *Plugin
			var err error
			if kind == "outputs" {
				p, err = DecodeOutput(cfg, version)
			} else {
				p, err = DecodeProcessor(cfg, version)
			}
			if err != nil {
				d.PluginErrors = append(d.PluginErrors, fmt.Sprintf("%s[%s]: %v", kind, name, err))
				continue
			}
			prefix := fmt.Sprintf("%s[%s].", kind, name)
			if kind == "outputs" {
				d.Outputs[name] = p
			} else {
				d.Processors[name] = p
				prefix += p.Type + "."
			}
			for _, k := range p.Unused {
				d.Unused = append(d.Unused, prefix+k)
			}
		}
	}
	sort.Strings(d.PluginErrors)
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

// decodeMap decodes cfg into the struct behind into as gNMIc decodes a target posted on its own and every plugin
// config (mapstructure with the duration hook, nothing else), and returns the decoder's metadata: the keys it used
// and those it had no field for (sorted).
func decodeMap(cfg map[string]any, into any) (*mapstructure.Metadata, error) {
	md := &mapstructure.Metadata{}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: mapstructure.StringToTimeDurationHookFunc(), Result: into, Metadata: md,
	})
	if err != nil {
		return nil, err
	}
	if err := dec.Decode(cfg); err != nil {
		return nil, err
	}
	sort.Strings(md.Unused)
	return md, nil
}

// decodeTarget decodes the body of POST /api/v1/config/targets as gNMIc does.
func decodeTarget(body io.Reader, into *types.TargetConfig) ([]string, error) {
	raw := map[string]any{}
	if err := json.NewDecoder(body).Decode(&raw); err != nil {
		return nil, err
	}
	md, err := decodeMap(raw, into)
	if err != nil {
		return nil, fmt.Errorf("decoding target config: %w", err)
	}
	return md.Unused, nil
}
