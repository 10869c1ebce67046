package fleetserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/quartet-dev/quartet-operator/internal/fleet/attributes"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
)

func start(t *testing.T) *fleetserver.Server {
	t.Helper()
	s := fleetserver.New("stack-1", "token")
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, s *fleetserver.Server, json bool) *fleetclient.Client {
	t.Helper()
	c, err := fleetclient.New(fleetclient.Config{
		BaseURL: s.URL() + "/pipeline.v1.PipelineService", Username: "stack-1", Password: "token",
		CAPEM: s.CAPEM(), JSON: json, Limiter: rate.NewLimiter(rate.Inf, 1),
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

func TestPipelineLifecycleInBothCodecs(t *testing.T) {
	for name, useJSON := range map[string]bool{"binary proto": false, "protojson": true} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := start(t)
			c := newClient(t, s, useJSON)
			ctx := context.Background()
			in := &pipelinev1.Pipeline{
				Name: "logs", Contents: "logging {}", Matchers: []string{`env="prod"`}, Enabled: proto.Bool(false),
				ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
				Source:     &pipelinev1.PipelineSource{Type: pipelinev1.PipelineSource_SOURCE_TYPE_GIT, Namespace: "repo"},
			}
			preview, err := c.UpsertPipeline(ctx, in, true)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(preview.Id).To(BeNil(), "validate_only assigns no ID")
			g.Expect(s.Pipelines()).To(BeEmpty(), "validate_only does not persist")

			created, err := c.UpsertPipeline(ctx, in, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(created.GetId()).To(Equal("1001"))
			g.Expect(created.GetEnabled()).To(BeFalse())
			g.Expect(created.GetSource().GetNamespace()).To(Equal("repo"))
			g.Expect(created.GetMatchers()).To(Equal([]string{`env="prod"`}))

			second, err := c.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: "otel", Contents: "service: {}",
				ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL}, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(second.GetId()).To(Equal("1002"))

			time.Sleep(2 * time.Millisecond) // timestamps have microsecond resolution
			updated, err := c.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: "logs", Contents: "logging { level = \"debug\" }"}, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(updated.GetId()).To(Equal("1001"), "upsert is keyed by name")
			g.Expect(updated.GetCreatedAt().AsTime()).To(Equal(created.GetCreatedAt().AsTime()), "createdAt preserved")
			g.Expect(updated.GetUpdatedAt().AsTime()).To(BeTemporally(">", created.GetUpdatedAt().AsTime()))
			g.Expect(updated.GetMatchers()).To(BeEmpty(), "the whole object is replaced")
			g.Expect(updated.GetSource()).To(BeNil(), "the whole object is replaced")
			g.Expect(updated.GetEnabled()).To(BeTrue(), "unset enabled defaults to true")

			got, err := c.GetPipeline(ctx, "1001")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.GetContents()).To(ContainSubstring("debug"))

			otel := pipelinev1.ConfigType_CONFIG_TYPE_OTEL
			list, err := c.ListPipelines(ctx, &pipelinev1.ListPipelinesRequest{ConfigType: &otel})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list).To(HaveLen(1))
			g.Expect(list[0].GetName()).To(Equal("otel"))
			list, err = c.ListPipelines(ctx, &pipelinev1.ListPipelinesRequest{Enabled: proto.Bool(true)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list).To(HaveLen(2))

			g.Expect(c.DeletePipeline(ctx, "1001")).To(Succeed())
			g.Expect(c.DeletePipeline(ctx, "1001")).To(Succeed(), "delete is idempotent")
			_, err = c.GetPipeline(ctx, "1001")
			g.Expect(fleetclient.IsNotFound(err)).To(BeTrue())

			_, err = c.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: "x"}, false)
			g.Expect(fleetclient.IsInvalid(err)).To(BeTrue(), "contents are required")

			wantType := "application/proto"
			if useJSON {
				wantType = "application/json"
			}
			for _, call := range s.Calls() {
				g.Expect(call.ContentType).To(Equal(wantType))
			}
			g.Expect(s.CallsTo("UpsertPipeline")).To(HaveLen(5))
		})
	}
}

func TestCollectorBulkUpdateIsAtomicWithEscapedPaths(t *testing.T) {
	g := NewWithT(t)
	s := start(t)
	c := newClient(t, s, true)
	ctx := context.Background()
	s.PutCollector(&collectorv1.Collector{Id: "a", RemoteAttributes: map[string]string{"keep": "1"}, LocalAttributes: map[string]string{"os": "linux"}})
	s.PutCollector(&collectorv1.Collector{Id: "b", LocalAttributes: map[string]string{"os": "windows"}})

	v := "x"
	ops := []*collectorv1.Operation{
		{Op: collectorv1.Operation_ADD, Path: attributes.Path("team/a~b"), Value: &v},
	}
	g.Expect(c.BulkUpdateCollectors(ctx, []string{"a", "b"}, ops)).To(Succeed())
	g.Expect(s.Collector("a").GetRemoteAttributes()).To(HaveKeyWithValue("team/a~b", "x"))
	g.Expect(s.CallsTo("BulkUpdateCollectors")[0].Request.(*collectorv1.BulkUpdateCollectorsRequest).GetOps()[0].GetPath()).
		To(Equal("/remote_attributes/team~1a~0b"))

	// The second op fails on b (no "keep"), so nothing is applied anywhere.
	bad := []*collectorv1.Operation{
		{Op: collectorv1.Operation_ADD, Path: attributes.Path("new"), Value: &v},
		{Op: collectorv1.Operation_REMOVE, Path: attributes.Path("keep")},
	}
	err := c.BulkUpdateCollectors(ctx, []string{"a", "b"}, bad)
	g.Expect(fleetclient.IsInvalid(err)).To(BeTrue())
	g.Expect(s.Collector("a").GetRemoteAttributes()).NotTo(HaveKey("new"))
	g.Expect(s.Collector("a").GetRemoteAttributes()).To(HaveKey("keep"))

	err = c.BulkUpdateCollectors(ctx, []string{"a"}, []*collectorv1.Operation{{Op: collectorv1.Operation_REMOVE, Path: "/remote_attributes/team/a~b"}})
	g.Expect(fleetclient.IsInvalid(err)).To(BeTrue(), "an unescaped / is rejected")
	err = c.BulkUpdateCollectors(ctx, []string{"missing"}, ops)
	g.Expect(fleetclient.IsNotFound(err)).To(BeTrue())

	g.Expect(c.BulkUpdateCollectors(ctx, []string{"a"}, []*collectorv1.Operation{{Op: collectorv1.Operation_REMOVE, Path: attributes.Path("team/a~b")}})).To(Succeed())
	g.Expect(s.Collector("a").GetRemoteAttributes()).To(Equal(map[string]string{"keep": "1"}))

	list, err := c.ListCollectors(ctx, []string{`os=~"lin.*"`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(1))
	list, err = c.ListCollectors(ctx, []string{`os=~"lin"`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(BeEmpty(), "regexes are fully anchored")
	list, err = c.ListCollectors(ctx, []string{`collector.id="b"`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(1))

	col, err := c.GetCollector(ctx, "a")
	g.Expect(err).NotTo(HaveOccurred())
	col.Name, col.Enabled = "renamed", proto.Bool(false)
	_, err = c.UpdateCollector(ctx, col)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Collector("a").GetName()).To(Equal("renamed"))
	_, err = c.GetCollector(ctx, "nope")
	g.Expect(fleetclient.IsNotFound(err)).To(BeTrue())
}

func TestFaultsAndAuthOnTheWire(t *testing.T) {
	g := NewWithT(t)
	s := start(t)
	ctx := context.Background()
	c := newClient(t, s, false)

	s.InjectFault(fleetserver.Fault{Method: "GetPipeline", Code: connect.CodeResourceExhausted, Times: 1})
	s.InjectFault(fleetserver.Fault{Method: "GetPipeline", Code: connect.CodeUnavailable, Times: 1})
	_, err := c.GetPipeline(ctx, "1")
	g.Expect(fleetclient.HTTPStatus(err)).To(Equal(429))
	_, err = c.GetPipeline(ctx, "1")
	g.Expect(fleetclient.HTTPStatus(err)).To(Equal(503))
	_, err = c.GetPipeline(ctx, "1")
	g.Expect(fleetclient.HTTPStatus(err)).To(Equal(404), "faults are consumed")

	_, err = c.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: "p", Contents: "x"}, false)
	g.Expect(err).NotTo(HaveOccurred())
	s.VanishPipeline("p")
	_, err = c.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: "p", Contents: "x"}, false)
	g.Expect(fleetclient.IsNotFound(err)).To(BeTrue())
	again, err := c.UpsertPipeline(ctx, &pipelinev1.Pipeline{Name: "p", Contents: "x"}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.GetId()).To(Equal("1002"), "recreated with a new ID")

	s.SetLatency(50 * time.Millisecond)
	start := time.Now()
	_, _ = c.GetPipeline(ctx, "1002")
	g.Expect(time.Since(start)).To(BeNumerically(">=", 50*time.Millisecond))
	s.ClearFaults()

	// Raw HTTP: the 429 carries a Connect error body, and bad credentials are 401.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(user string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/pipeline.v1.PipelineService/GetPipeline", bytes.NewBufferString(`{"id":"1002"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user)))
		res, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		return res.StatusCode, m
	}
	code, body := post("stack-1:token")
	g.Expect(code).To(Equal(200))
	g.Expect(body).To(HaveKeyWithValue("id", "1002"))
	g.Expect(body).To(HaveKey("createdAt"), "protojson uses camelCase names")
	g.Expect(body).To(HaveKeyWithValue("configType", "CONFIG_TYPE_ALLOY"), "protojson uses string enums")
	s.InjectFault(fleetserver.Fault{Method: "GetPipeline", Code: connect.CodeResourceExhausted, Times: 1})
	code, body = post("stack-1:token")
	g.Expect(code).To(Equal(429))
	g.Expect(body).To(HaveKeyWithValue("code", "resource_exhausted"))
	code, body = post("stack-1:wrong")
	g.Expect(code).To(Equal(401))
	g.Expect(body).To(HaveKeyWithValue("code", "unauthenticated"))
}

func TestEveryCallIsASpan(t *testing.T) {
	g := NewWithT(t)
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(provider)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

	s := start(t)
	c := newClient(t, s, false)
	_, err := c.UpsertPipeline(context.Background(), &pipelinev1.Pipeline{Name: "traced", Contents: "x"}, false)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.GetPipeline(context.Background(), "404")
	g.Expect(fleetclient.IsNotFound(err)).To(BeTrue())

	spans := recorder.Ended()
	g.Expect(spans).To(HaveLen(2))
	g.Expect(spans[0].Name()).To(Equal("fleet.UpsertPipeline"))
	g.Expect(spans[0].Status().Code).To(Equal(codes.Unset))
	g.Expect(spans[1].Name()).To(Equal("fleet.GetPipeline"))
	g.Expect(spans[1].Status().Code).To(Equal(codes.Error))
	attrs := map[string]string{}
	for _, kv := range spans[1].Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	g.Expect(attrs).To(HaveKeyWithValue("http.response.status_code", "404"))
	g.Expect(attrs).To(HaveKeyWithValue("rpc.method", "GetPipeline"))
	g.Expect(attrs).To(HaveKey("fleet.limiter_wait_seconds"))
}

func TestCreateUpdateByIDAndRetryAfter(t *testing.T) {
	for _, json := range []bool{false, true} {
		t.Run(map[bool]string{false: "proto", true: "json"}[json], func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			s := fleetserver.New("stack-1", "token")
			s.Start()
			defer s.Close()
			c := newClient(t, s, json)
			outside := s.PutPipeline(&pipelinev1.Pipeline{Name: "ui", Contents: "x"})

			_, err := c.CreatePipeline(ctx, &pipelinev1.Pipeline{Name: "ui", Contents: "y"})
			g.Expect(fleetclient.IsAlreadyExists(err)).To(BeTrue(), "a taken name: %v", err)
			id, err := c.GetPipelineID(ctx, "ui")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(outside.GetId()))

			mine, err := c.CreatePipeline(ctx, &pipelinev1.Pipeline{Name: "mine", Contents: "a"})
			g.Expect(err).NotTo(HaveOccurred())
			// Update by ID; a rename into a taken name is refused; a missing ID is 404.
			upd, err := c.UpdatePipeline(ctx, &pipelinev1.Pipeline{Id: mine.Id, Name: "mine", Contents: "b"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(upd.GetId()).To(Equal(mine.GetId()))
			g.Expect(upd.GetContents()).To(Equal("b"))
			_, err = c.UpdatePipeline(ctx, &pipelinev1.Pipeline{Id: mine.Id, Name: "ui", Contents: "b"})
			g.Expect(fleetclient.IsAlreadyExists(err)).To(BeTrue())
			_, err = c.UpdatePipeline(ctx, &pipelinev1.Pipeline{Id: proto.String("9999"), Name: "mine", Contents: "b"})
			g.Expect(fleetclient.IsNotFound(err)).To(BeTrue())
			g.Expect(s.PipelineByName("ui").GetContents()).To(Equal("x"), "the outside pipeline is untouched")

			s.InjectFault(fleetserver.Fault{Method: "GetPipeline", Code: connect.CodeResourceExhausted, Times: 1, RetryAfter: 3 * time.Second})
			_, err = c.GetPipeline(ctx, id)
			g.Expect(fleetclient.IsRateLimited(err)).To(BeTrue())
			g.Expect(fleetclient.RetryAfter(err)).To(Equal(3 * time.Second))

			s.SetCredentials("stack-1", "rotated")
			_, err = c.GetPipeline(ctx, id)
			g.Expect(fleetclient.IsUnauthenticated(err)).To(BeTrue())
		})
	}
}
