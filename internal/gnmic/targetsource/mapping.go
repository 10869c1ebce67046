package targetsource

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"google.golang.org/protobuf/types/known/structpb"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// Per-device failure reasons.
const (
	ReasonNotAnObject    = "NotAnObject"
	ReasonMissingName    = "MissingName"
	ReasonMissingAddress = "MissingAddress"
	ReasonInvalidPort    = "InvalidPort"
	ReasonInvalidProfile = "InvalidProfile"
	ReasonInvalidLabels  = "InvalidLabels"
	ReasonDuplicateName  = "DuplicateName"
)

// MappingErrorReason is the failure reason of a mapping expression that failed for one field.
func MappingErrorReason(field string) string { return "MappingError(" + field + ")" }

// evalCostLimit bounds the work one expression may do per evaluation.
const evalCostLimit = 1_000_000

// Device is one device as the source reported it, before defaults.
type Device struct {
	Name    string
	Address string
	// Port is 0 when unset.
	Port    int
	Profile string
	Labels  map[string]string
}

// Failure is a device that could not become a Target.
type Failure struct {
	Name   string
	Reason string
}

// Mapper evaluates mapping expressions. Compiled programs are cached per expression text; a Mapper is safe for
// concurrent use and meant to be shared by every TargetSource.
type Mapper struct {
	env      *cel.Env
	mu       sync.RWMutex
	programs map[string]cel.Program
}

// NewMapper builds the CEL environment: variables self and item, optional types and the strings, math, lists,
// sets, regex and bindings extensions.
func NewMapper() (*Mapper, error) {
	env, err := cel.NewEnv(
		cel.Variable("self", cel.DynType),
		cel.Variable("item", cel.DynType),
		cel.OptionalTypes(),
		ext.Strings(), ext.Math(), ext.Lists(), ext.Sets(), ext.Regex(), ext.Bindings(),
	)
	if err != nil {
		return nil, err
	}
	return &Mapper{env: env, programs: map[string]cel.Program{}}, nil
}

// Compile returns the cached program of expr, compiling it on first use.
func (m *Mapper) Compile(expr string) (cel.Program, error) {
	m.mu.RLock()
	p, ok := m.programs[expr]
	m.mu.RUnlock()
	if ok {
		return p, nil
	}
	ast, iss := m.env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	p, err := m.env.Program(ast, cel.CostLimit(evalCostLimit))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.programs[expr] = p
	m.mu.Unlock()
	return p, nil
}

// CachedPrograms is how many compiled programs the cache holds.
func (m *Mapper) CachedPrograms() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.programs)
}

// MappingExpressions returns the mapping's expressions by field name, leaving out unset ones.
func MappingExpressions(mp *gnmicv1alpha1.Mapping) map[string]string {
	out := map[string]string{}
	if mp == nil {
		return out
	}
	for k, v := range map[string]string{"items": mp.Items, "name": mp.Name, "address": mp.Address, "port": mp.Port,
		"profile": mp.Profile, "labels": mp.Labels} {
		if strings.TrimSpace(v) != "" {
			out[k] = v
		}
	}
	return out
}

// CheckMapping compiles every expression of the mapping and returns the failures by field name.
func (m *Mapper) CheckMapping(mp *gnmicv1alpha1.Mapping) map[string]error {
	errs := map[string]error{}
	for field, expr := range MappingExpressions(mp) {
		if _, err := m.Compile(expr); err != nil {
			errs[field] = err
		}
	}
	return errs
}

// Result is what mapping one document gives.
type Result struct {
	Devices  []Device
	Failures []Failure
}

// ErrDeviceFailed is wrapped by Map's error when onError is Fail and a device could not be mapped.
var ErrDeviceFailed = errors.New("device could not be mapped")

// Map turns a parsed document into devices. Without a mapping the document must be a list of
// {name, address, port, profile, labels}. A field without an expression reads item.<field>. Per-device failures
// are returned in Failures, unless onError is Fail: then the first one fails the whole document.
func (m *Mapper) Map(doc any, mp *gnmicv1alpha1.Mapping) (Result, error) {
	exprs := MappingExpressions(mp)
	progs := map[string]cel.Program{}
	for field, expr := range exprs {
		p, err := m.Compile(expr)
		if err != nil {
			return Result{}, fmt.Errorf("mapping.%s: %w", field, err)
		}
		progs[field] = p
	}
	failFast := mp != nil && mp.OnError == "Fail"
	items := doc
	if p, ok := progs["items"]; ok {
		v, err := eval(p, doc, nil)
		if err != nil {
			return Result{}, fmt.Errorf("mapping.items: %w", err)
		}
		items = v
	}
	list, ok := items.([]any)
	if !ok {
		if items == nil {
			return Result{}, nil
		}
		return Result{}, fmt.Errorf("the device list is a %s, not a list", kindOf(items))
	}
	var res Result
	for _, item := range list {
		dev, reason := m.mapItem(doc, item, progs)
		if reason != "" {
			if failFast {
				return Result{}, fmt.Errorf("device %q: %s: %w", dev.Name, reason, ErrDeviceFailed)
			}
			res.Failures = append(res.Failures, Failure{Name: dev.Name, Reason: reason})
			continue
		}
		res.Devices = append(res.Devices, dev)
	}
	return res, nil
}

func (m *Mapper) mapItem(doc, item any, progs map[string]cel.Program) (Device, string) {
	obj, ok := item.(map[string]any)
	if !ok {
		return Device{}, ReasonNotAnObject
	}
	field := func(name string) (any, string) {
		if p, ok := progs[name]; ok {
			v, err := eval(p, doc, obj)
			if err != nil {
				return nil, MappingErrorReason(name)
			}
			return v, ""
		}
		return obj[name], ""
	}
	var dev Device
	v, reason := field("name")
	if reason != "" {
		return dev, reason
	}
	dev.Name = scalarString(v)
	if strings.TrimSpace(dev.Name) == "" {
		return dev, ReasonMissingName
	}
	if v, reason = field("address"); reason != "" {
		return dev, reason
	}
	dev.Address = strings.TrimSpace(scalarString(v))
	if dev.Address == "" {
		return dev, ReasonMissingAddress
	}
	if v, reason = field("port"); reason != "" {
		return dev, reason
	}
	port, ok := toPort(v)
	if !ok {
		return dev, ReasonInvalidPort
	}
	dev.Port = port
	if v, reason = field("profile"); reason != "" {
		return dev, reason
	}
	switch p := v.(type) {
	case nil:
	case string:
		dev.Profile = p
	default:
		return dev, ReasonInvalidProfile
	}
	if v, reason = field("labels"); reason != "" {
		return dev, reason
	}
	labels, ok := toLabels(v)
	if !ok {
		return dev, ReasonInvalidLabels
	}
	dev.Labels = labels
	return dev, ""
}

// eval runs a program and converts its result to plain Go values; optional.none becomes nil.
func eval(p cel.Program, self, item any) (any, error) {
	out, _, err := p.Eval(map[string]any{"self": self, "item": item})
	if err != nil {
		return nil, err
	}
	return toNative(out)
}

var structValueType = reflect.TypeOf(&structpb.Value{})

func toNative(v ref.Val) (any, error) {
	if o, ok := v.(*types.Optional); ok {
		if !o.HasValue() {
			return nil, nil
		}
		return toNative(o.GetValue())
	}
	switch t := v.(type) {
	case types.String:
		return string(t), nil
	case types.Int:
		return float64(t), nil
	case types.Uint:
		return float64(t), nil
	case types.Double:
		return float64(t), nil
	case types.Bool:
		return bool(t), nil
	case types.Null:
		return nil, nil
	}
	native, err := v.ConvertToNative(structValueType)
	if err != nil {
		return nil, err
	}
	return native.(*structpb.Value).AsInterface(), nil
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	}
	return ""
}

// toPort accepts a number or numeric string from 0 to 65535; 0, empty and null mean unset.
func toPort(v any) (int, bool) {
	switch t := v.(type) {
	case nil:
		return 0, true
	case float64:
		if t != math.Trunc(t) || t < 0 || t > 65535 {
			return 0, false
		}
		return int(t), true
	case string:
		t = strings.TrimSpace(t)
		if t == "" {
			return 0, true
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > 65535 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// toLabels accepts a map whose values are strings, numbers or booleans.
func toLabels(v any) (map[string]string, bool) {
	switch t := v.(type) {
	case nil:
		return nil, true
	case map[string]any:
		out := make(map[string]string, len(t))
		for k, val := range t {
			switch val.(type) {
			case string, float64, bool:
				out[k] = scalarString(val)
			case nil:
				out[k] = ""
			default:
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return fmt.Sprintf("%T", v)
}
