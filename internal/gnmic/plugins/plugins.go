// Package plugins holds the config keys of gNMIc's output plugins and event processors: each plugin decodes its
// config map with mapstructure into its own struct, and silently ignores keys that struct has no field for.
package plugins

import (
	"maps"
	"slices"
	"strings"
)

// Kind is what JSON value a plugin's config field accepts, as far as the stand-in checks it.
type Kind string

// The kinds. Object is a Go map or struct (a JSON object); Any is a type the table does not classify (from
// another package, or an interface), which accepts every value here.
const (
	String     Kind = "string"
	Int        Kind = "int"
	Uint       Kind = "uint"
	Float      Kind = "float"
	Bool       Kind = "bool"
	Duration   Kind = "duration"
	StringList Kind = "[]string"
	List       Kind = "list"
	Object     Kind = "object"
	Any        Kind = "any"
)

// Keys maps a plugin's config keys (its mapstructure tags) to their kinds.
type Keys map[string]Kind

// SourceVersion is the gNMIc release whose source TestTablesMatchGNMIcSource reads on every run: the newest one
// the Go module proxy serves whole (hack/tools/gnmic builds the same release).
const SourceVersion = "v0.37.0"

// CurrentVersion is the newer release the tables were also checked against, by hand, from a source snapshot;
// collectors run it (0.45 and later cannot be built from the module proxy).
const CurrentVersion = "v0.47.0"

// Output returns the config keys of gNMIc's output plugin typ: as of CurrentVersion when current, else as of
// SourceVersion. ok is false for a type the Output CRD does not offer.
func Output(typ string, current bool) (keys Keys, ok bool) {
	return lookup(outputs037, outputsAdded047, typ, current)
}

// Processor returns the config keys of gNMIc's event processor typ, as Output does.
func Processor(typ string, current bool) (keys Keys, ok bool) {
	return lookup(processors037, processorsAdded047, typ, current)
}

// ProcessorTypes lists every event processor type of the tables (current: as of CurrentVersion).
func ProcessorTypes(current bool) []string {
	var out []string
	for typ := range processors037 {
		out = append(out, typ)
	}
	if current {
		for typ := range processorsAdded047 {
			if _, ok := processors037[typ]; !ok {
				out = append(out, typ)
			}
		}
	}
	slices.Sort(out)
	return out
}

func lookup(base, added map[string]Keys, typ string, current bool) (Keys, bool) {
	out := Keys{}
	keys, ok := base[typ]
	maps.Copy(out, keys)
	if extra, found := added[typ]; current && found {
		ok = true
		maps.Copy(out, extra)
	}
	return out, ok
}

// Unknown returns the keys of cfg the plugin has no field for, sorted. Like mapstructure, which decodes every
// plugin config, it matches key names case-insensitively.
func (k Keys) Unknown(cfg map[string]any) []string {
	var out []string
	for key := range cfg {
		if _, ok := k.Lookup(key); !ok {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// Lookup finds key as mapstructure does: the exact name first, then any name equal under case folding.
func (k Keys) Lookup(key string) (name string, ok bool) {
	if _, ok := k[key]; ok {
		return key, true
	}
	for name := range k {
		if strings.EqualFold(name, key) {
			return name, true
		}
	}
	return "", false
}
