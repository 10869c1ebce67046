package otlpjson

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// otlpJSON is an export request as the OTLP/JSON spec writes it: hex IDs (either case), string-encoded 64-bit
// integers, links.
const otlpJSON = `{"resourceSpans":[{"resource":{"attributes":[
  {"key":"service.name","value":{"stringValue":"katastroma-source"}}]},
 "scopeSpans":[{"scope":{"name":"gitops"},"spans":[
   {"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","name":"event",
    "startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
    "status":{"code":2,"message":"provisioner: denied"}},
   {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b173","parentSpanId":"eee19b7ec3c1b174",
    "name":"source_target","links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}]}]}]}]}`

func TestDecodeReadsHexIDs(t *testing.T) {
	g := NewWithT(t)
	req, err := Decode([]byte(otlpJSON))
	g.Expect(err).NotTo(HaveOccurred())
	spans := req.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()
	want, _ := hex.DecodeString("5b8efff798038103d269b633813fc60c")
	g.Expect(spans[0].GetTraceId()).To(Equal(want))
	g.Expect(spans[1].GetParentSpanId()).To(Equal(spans[0].GetSpanId()))
	g.Expect(hex.EncodeToString(spans[1].GetLinks()[0].GetSpanId())).To(Equal("b7ad6b7169203331"))
	g.Expect(spans[0].GetEndTimeUnixNano()).To(Equal(uint64(1544712661000000000)))
}

func TestDecodeRejects(t *testing.T) {
	for name, body := range map[string]string{
		"base64 ID":     `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"W47/95gDgQPSabYzgT/GDA=="}]}]}]}`,
		"odd hex":       `{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"abc"}]}]}]}`,
		"not JSON":      `{"resourceSpans":`,
		"trailing data": `{} {}`,
		"wrong type":    `{"resourceSpans":{"x":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(body))
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

// encodeJSON writes OTLP/JSON: protojson with the ID fields turned back from base64 into hex.
func encodeJSON(req *collectortrace.ExportTraceServiceRequest) ([]byte, error) {
	b, err := protojson.Marshal(req)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, val := range v {
				if s, ok := val.(string); ok && IDFields[k] {
					raw, _ := base64.StdEncoding.DecodeString(s)
					v[k] = hex.EncodeToString(raw)
					continue
				}
				walk(val)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return json.Marshal(doc)
}

// FuzzDecode: decoding never panics, and whatever decodes survives an OTLP/JSON round trip unchanged (hex IDs
// in, the same bytes out).
func FuzzDecode(f *testing.F) {
	f.Add([]byte(otlpJSON))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"","spanId":"00"}]}]}]}`))
	f.Add([]byte(`{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"ff","parent_span_id":"0102"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := Decode(body)
		if err != nil {
			return
		}
		again, err := encodeJSON(req)
		if err != nil {
			t.Fatalf("re-encoding a decoded request: %v", err)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("decoding %s: %v", again, err)
		}
		if !proto.Equal(req, back) {
			t.Fatalf("round trip changed the request:\n%v\n%v", req, back)
		}
	})
}
