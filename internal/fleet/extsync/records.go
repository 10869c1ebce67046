package extsync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Record is one source row or JSON object.
type Record map[string]any

// ExtractRecords decodes a JSON document and returns the array at the dotted recordsPath (the root when
// empty). Every element must be an object.
func ExtractRecords(doc []byte, recordsPath string) ([]Record, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("response is not JSON: %w", err)
	}
	if recordsPath != "" {
		for _, part := range strings.Split(recordsPath, ".") {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("recordsPath %q: %q is not inside an object", recordsPath, part)
			}
			if v, ok = obj[part]; !ok {
				return nil, fmt.Errorf("recordsPath %q: no field %q", recordsPath, part)
			}
		}
	}
	arr, ok := v.([]any)
	if !ok {
		where := "the document root"
		if recordsPath != "" {
			where = "recordsPath " + strconv.Quote(recordsPath)
		}
		return nil, fmt.Errorf("%s is not an array", where)
	}
	out := make([]Record, 0, len(arr))
	for i, e := range arr {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("record %d is not an object", i)
		}
		out = append(out, obj)
	}
	return out, nil
}

// lookup finds field in r: the literal key first (SQL column names may contain dots), then a dotted path.
func lookup(r Record, field string) (any, bool) {
	if v, ok := r[field]; ok {
		return v, true
	}
	var v any = map[string]any(r)
	for _, part := range strings.Split(field, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// stringValue renders a scalar as an attribute value; null is absent.
func stringValue(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case []byte:
		return string(x), true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), true
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), true
	case fmt.Stringer:
		return x.String(), true
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x), true
		}
		return string(b), true
	}
}

// Result is what a run's records map to.
type Result struct {
	// Attributes per collector ID.
	Attributes map[string]map[string]string
	// Seen is the number of records; Applied the number that produced attributes for a selected collector.
	Seen, Applied int
	// Skipped counts records without a collector ID, missing a required key or with an oversized value.
	Skipped int
}

// Map turns records into attributes per collector. selected says whether the sync may touch a collector.
// Records for the same collector merge; a later record overrides an earlier one key by key.
func Map(records []Record, m fleetv1alpha1.AttributeMapping, selected func(id string) bool) Result {
	res := Result{Attributes: map[string]map[string]string{}, Seen: len(records)}
	keys := make([]string, 0, len(m.AttributeFields))
	for k := range m.AttributeFields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
records:
	for _, r := range records {
		raw, ok := lookup(r, m.CollectorIDField)
		id, ok2 := stringValue(raw)
		if !ok || !ok2 || strings.TrimSpace(id) == "" {
			res.Skipped++
			continue
		}
		attrs := map[string]string{}
		for _, k := range keys {
			v, ok := lookup(r, m.AttributeFields[k])
			if !ok {
				continue
			}
			s, ok := stringValue(v)
			if !ok {
				continue
			}
			if len(s) > fleetv1alpha1.MaxAttributeValueLength {
				res.Skipped++
				continue records
			}
			attrs[k] = s
		}
		for _, k := range m.RequiredKeys {
			if _, ok := attrs[k]; !ok {
				res.Skipped++
				continue records
			}
		}
		if len(attrs) == 0 || !selected(id) {
			continue
		}
		res.Applied++
		if res.Attributes[id] == nil {
			res.Attributes[id] = attrs
			continue
		}
		for k, v := range attrs {
			res.Attributes[id][k] = v
		}
	}
	return res
}

// ErrTooManyOwned is returned by Owned when the claim exceeds the status limits.
var ErrTooManyOwned = errors.New("owned keys exceed the limit")

// Owned renders the attributes as status.ownedKeys, sorted by collector ID, or ErrTooManyOwned when they cover
// more than MaxOwnedCollectors collectors or MaxOwnedBytes bytes.
func Owned(attrs map[string]map[string]string) ([]fleetv1alpha1.OwnedAttributes, error) {
	if len(attrs) > fleetv1alpha1.MaxOwnedCollectors {
		return nil, fmt.Errorf("%w: %d collectors, at most %d", ErrTooManyOwned, len(attrs), fleetv1alpha1.MaxOwnedCollectors)
	}
	out := make([]fleetv1alpha1.OwnedAttributes, 0, len(attrs))
	size := 0
	for id, a := range attrs {
		size += len(id)
		for k, v := range a {
			size += len(k) + len(v) + 8
		}
		out = append(out, fleetv1alpha1.OwnedAttributes{CollectorID: id, Attributes: a})
	}
	if size > fleetv1alpha1.MaxOwnedBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooManyOwned, size, fleetv1alpha1.MaxOwnedBytes)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CollectorID < out[j].CollectorID })
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
