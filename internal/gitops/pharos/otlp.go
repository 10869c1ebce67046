package pharos

import (
	"compress/gzip"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pharos/otlpjson"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// The attribute contract between the stages and pharos.
const (
	// AttrSourceAddress carries the gRPC address (host:port) of the source handler that started the event. The
	// source handler sets it as a resource attribute (OTEL_RESOURCE_ATTRIBUTES) or on its spans; a span attribute
	// wins over the resource's.
	AttrSourceAddress = "katastroma.source_handler.address"
	// AttrReplayOf, on a replay's root `event` span, is the event ID the replay re-runs.
	AttrReplayOf = "katastroma.replay_of"
	// AttrTenant, on the source handler's `event` and `event.started` spans, is the event's tenant.
	AttrTenant = "tenant"
	// RootSpanName is the name of an event's root span; SourceTargetSpanName its per-target children.
	RootSpanName         = "event"
	SourceTargetSpanName = "source_target"
)

// DefaultMaxBodyBytes bounds an OTLP request (HTTP body or gRPC message) when Options leave it unset.
const DefaultMaxBodyBytes = 4 << 20

// Spans extracts the spans pharos tracks from an export request: only those of the gitops instrumentation scope,
// so the receiver ignores anything else a collector forwards (including pharos's own gRPC client spans).
func Spans(req *collectortrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		resAddr := attr(rs.GetResource().GetAttributes(), AttrSourceAddress)
		for _, ss := range rs.GetScopeSpans() {
			if ss.GetScope().GetName() != stage.TracerName {
				continue
			}
			for _, sp := range ss.GetSpans() {
				if len(sp.GetTraceId()) != 16 {
					continue
				}
				s := Span{TraceID: hex.EncodeToString(sp.GetTraceId()),
					Root:    sp.GetName() == RootSpanName && len(sp.GetParentSpanId()) == 0,
					Error:   sp.GetStatus().GetCode() == tracev1.Status_STATUS_CODE_ERROR,
					Message: sp.GetStatus().GetMessage(), Address: resAddr,
					ReplayOf:   attr(sp.GetAttributes(), AttrReplayOf),
					Superseded: boolAttr(sp.GetAttributes(), stage.AttrSuperseded),
					Tenant:     attr(sp.GetAttributes(), AttrTenant)}
				if a := attr(sp.GetAttributes(), AttrSourceAddress); a != "" {
					s.Address = a
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func attr(kvs []*commonv1.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func boolAttr(kvs []*commonv1.KeyValue, key string) bool {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetBoolValue()
		}
	}
	return false
}

// healthPath is the kubelet's probe, open without a token.
const healthPath = "/healthz"

// httpHandler serves OTLP/HTTP POST /v1/traces (application/x-protobuf and application/json, optionally gzip).
func httpHandler(maxBytes int64, export func(*collectortrace.ExportTraceServiceRequest)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != "application/x-protobuf" && mt != "application/json" {
			http.Error(w, "content type must be application/x-protobuf or application/json", http.StatusUnsupportedMediaType)
			return
		}
		body, err := readBody(w, r, maxBytes)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &collectortrace.ExportTraceServiceRequest{}
		if mt == "application/json" {
			req, err = otlpjson.Decode(body)
		} else {
			err = proto.Unmarshal(body, req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		export(req)
		var out []byte
		if mt == "application/json" {
			out, _ = protojson.Marshal(&collectortrace.ExportTraceServiceResponse{})
		} else {
			out, _ = proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		}
		w.Header().Set("Content-Type", mt)
		_, _ = w.Write(out)
	})
	mux.HandleFunc("GET "+healthPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	return mux
}

// readBody reads the request body within maxBytes, after gunzipping when the client compressed it (the limit
// applies to the compressed and the decompressed size, so a small bomb cannot expand without bound).
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error) {
	var rd io.Reader = http.MaxBytesReader(w, r.Body, maxBytes)
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, err
		}
		defer func() { _ = zr.Close() }()
		rd = io.LimitReader(zr, maxBytes+1)
	default:
		return nil, fmt.Errorf("unsupported content encoding %q", r.Header.Get("Content-Encoding"))
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > maxBytes {
		return nil, &http.MaxBytesError{Limit: maxBytes}
	}
	return body, nil
}
