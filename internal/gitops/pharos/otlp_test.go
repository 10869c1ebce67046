package pharos

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pharos/otlpjson"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// otlpJSON is an export request as the OTLP/JSON spec writes it: hex IDs, string-encoded 64-bit integers.
const otlpJSON = `{"resourceSpans":[{"resource":{"attributes":[
  {"key":"service.name","value":{"stringValue":"katastroma-source"}},
  {"key":"katastroma.source_handler.address","value":{"stringValue":"source.katastroma:50051"}}]},
 "scopeSpans":[
  {"scope":{"name":"` + stage.TracerName + `"},"spans":[
   {"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","name":"event",
    "startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
    "status":{"code":2,"message":"provisioner: denied"}},
   {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b173","parentSpanId":"eee19b7ec3c1b174",
    "name":"source_target","attributes":[{"key":"katastroma.source_handler.address","value":{"stringValue":"10.0.0.7:50051"}}],
    "links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}]}]},
  {"scope":{"name":"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"},"spans":[
   {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000001","name":"Replay"}]}]}]}`

func TestSpansFromOTLPJSON(t *testing.T) {
	g := NewWithT(t)
	req, err := otlpjson.Decode([]byte(otlpJSON))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Spans(req)).To(Equal([]Span{
		{TraceID: "5b8efff798038103d269b633813fc60c", Root: true, Error: true, Message: "provisioner: denied",
			Address: "source.katastroma:50051"},
		{TraceID: "5b8efff798038103d269b633813fc60c", Address: "10.0.0.7:50051"},
	}), "the otelgrpc span is another scope and ignored; the span attribute wins over the resource")
}
