// Package otlpjson decodes OTLP/JSON trace export requests, whose trace and span IDs are hex strings rather than
// the base64 protojson expects for bytes fields.
package otlpjson

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// IDFields are the OTLP JSON fields that hold trace and span IDs. OTLP/JSON encodes them as hex strings where
// protojson expects base64 for bytes fields, so they are rewritten before protojson sees them.
var IDFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true}

// Decode decodes an OTLP/JSON trace export request.
func Decode(body []byte) (*collectortrace.ExportTraceServiceRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep 64-bit timestamps exact
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding OTLP JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decoding OTLP JSON: trailing data after the request")
	}
	if err := hexIDsToBase64(doc); err != nil {
		return nil, err
	}
	rewritten, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	req := &collectortrace.ExportTraceServiceRequest{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(rewritten, req); err != nil {
		return nil, fmt.Errorf("decoding OTLP JSON: %w", err)
	}
	return req, nil
}

// hexIDsToBase64 rewrites every ID field in place. An ID that is not hex is an error: decoding it as base64 would
// silently track the wrong trace.
func hexIDsToBase64(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			s, isString := val.(string)
			if IDFields[k] && isString {
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("decoding OTLP JSON: %s %q is not hex", k, s)
				}
				v[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := hexIDsToBase64(val); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := hexIDsToBase64(e); err != nil {
				return err
			}
		}
	}
	return nil
}
