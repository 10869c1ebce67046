package plan

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// gNMIc collectors do not read their API bodies with encoding/json: they decode the JSON into a map and then map
// it onto their config types with mapstructure, whose keys are the mapstructure tags. Most of gNMIc's types carry
// identical json tags, but not all (ClientKeepalive has none, so encoding/json would write "PermitWithoutStream"
// and gNMIc would drop it). So the operator encodes by the mapstructure tags, as the collector decodes.

var (
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
)

// toWire turns v into plain maps, slices and scalars keyed by mapstructure tags. Durations become Go duration
// strings ("10s"), which the collector's only decode hook (StringToTimeDurationHookFunc) parses; a time.Time is
// an error, because no gNMIc collector can decode one (mapstructure expects a map for the struct).
func toWire(v reflect.Value, path string) (any, error) {
	switch v.Kind() {
	case reflect.Invalid:
		return nil, nil
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return toWire(v.Elem(), path)
	case reflect.Struct:
		if v.Type() == timeType {
			return nil, fmt.Errorf("%s: gNMIc collectors cannot decode a time value", path)
		}
		out := map[string]any{}
		if err := structToWire(v, path, out); err != nil {
			return nil, err
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		out := make(map[string]any, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key().Interface())
			w, err := toWire(iter.Value(), path+"["+key+"]")
			if err != nil {
				return nil, err
			}
			out[key] = w
		}
		return out, nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		out := make([]any, v.Len())
		for i := range v.Len() {
			w, err := toWire(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = w
		}
		return out, nil
	}
	if v.Type() == durationType {
		return time.Duration(v.Int()).String(), nil
	}
	return v.Interface(), nil
}

// structToWire writes the exported fields of a struct into out under their mapstructure names (the Go field
// name when untagged, as mapstructure matches it), skipping "-" and omitempty zero values.
func structToWire(v reflect.Value, path string, out map[string]any) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		if strings.Contains(opts, "squash") {
			if err := structToWire(reflect.Indirect(fv), path, out); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		w, err := toWire(fv, joinPath(path, name))
		if err != nil {
			return err
		}
		if w != nil {
			out[name] = w
		}
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
