package gnmicserver

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/plugins"
)

// Plugin is what one gNMIc output plugin or event processor makes of its config map.
type Plugin struct {
	// Type is the output type or processor type the collector picked the plugin by.
	Type string
	// Values holds, under the plugin's key, every config value the plugin decoded, as its Go field holds it:
	// string, int64, uint64, float64, bool, time.Duration, []string, []any, map[string]any or, for kinds the table
	// does not classify, the JSON value itself.
	Values map[string]any
	// Unused lists the keys the plugin has no field for, sorted: gNMIc ignores them without a word.
	Unused []string
}

// DecodeOutput decodes one entry of the apply body's outputs as the collector of version does: the "type" key
// picks the plugin, which decodes the whole map (type included, which it has no field for and which the collector
// has read) with mapstructure and the duration hook into its config struct.
func DecodeOutput(cfg map[string]any, version string) (*Plugin, error) {
	typ, _ := cfg["type"].(string)
	keys, ok := plugins.Output(typ, AtLeast(version, 0, 47))
	if !ok {
		return nil, fmt.Errorf("unknown output type %q", typ)
	}
	p, err := decodePlugin(typ, keys, cfg)
	if err != nil {
		return nil, err
	}
	p.Unused = slices.DeleteFunc(p.Unused, func(k string) bool { return k == "type" })
	return p, nil
}

// DecodeProcessor decodes one entry of the apply body's processors, {type: config}, as the collector does: the
// only key picks the event processor, which decodes the config it holds.
func DecodeProcessor(entry map[string]any, version string) (*Plugin, error) {
	if len(entry) != 1 {
		return nil, fmt.Errorf("a processor entry holds exactly one type, not %d", len(entry))
	}
	for typ, raw := range entry {
		keys, ok := plugins.Processor(typ, AtLeast(version, 0, 47))
		if !ok {
			return nil, fmt.Errorf("unknown event processor type %q", typ)
		}
		cfg, ok := raw.(map[string]any)
		if !ok && raw != nil {
			return nil, fmt.Errorf("processor %s: expected a map, got %T", typ, raw)
		}
		return decodePlugin(typ, keys, cfg)
	}
	panic("unreachable")
}

var anyType = reflect.TypeFor[any]()

// goTypes are the Go types the stand-in decodes each kind into: mapstructure then accepts and refuses the same
// JSON values as for the plugin's own field of that kind.
var goTypes = map[plugins.Kind]reflect.Type{
	plugins.String: reflect.TypeFor[string](), plugins.Int: reflect.TypeFor[int64](),
	plugins.Uint: reflect.TypeFor[uint64](), plugins.Float: reflect.TypeFor[float64](),
	plugins.Bool: reflect.TypeFor[bool](), plugins.Duration: reflect.TypeFor[time.Duration](),
	plugins.StringList: reflect.TypeFor[[]string](), plugins.List: reflect.TypeFor[[]any](),
	plugins.Object: reflect.TypeFor[map[string]any](), plugins.Any: anyType,
}

// decodePlugin builds a struct with one field per key of the plugin's table, tagged with the key, and decodes
// cfg into it as gNMIc's outputs.DecodeConfig and formatters.DecodeConfig do (decodeMap); an error carries
// mapstructure's text.
func decodePlugin(typ string, keys plugins.Keys, cfg map[string]any) (*Plugin, error) {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	fields := make([]reflect.StructField, len(names))
	for i, k := range names {
		t := goTypes[keys[k]]
		if t == nil {
			t = anyType
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t, Tag: reflect.StructTag(`mapstructure:"` + k + `"`)}
	}
	v := reflect.New(reflect.StructOf(fields))
	md, err := decodeMap(cfg, v.Interface())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	p := &Plugin{Type: typ, Values: map[string]any{}, Unused: md.Unused}
	for i, k := range names {
		if slices.Contains(md.Keys, k) {
			p.Values[k] = v.Elem().Field(i).Interface()
		}
	}
	return p, nil
}
