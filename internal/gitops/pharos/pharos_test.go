package pharos

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// fakeSource is a real gRPC SourceHandlerService on loopback that records Replay calls. Each started replay is a
// new root `event` span (with the replay_of attribute the real source handler sets), exported through the same
// OTLP exporter as the test's other spans and ended with the status failReplays decides.
type fakeSource struct {
	katastromav1.UnimplementedSourceHandlerServiceServer
	addr string

	mu          sync.Mutex
	calls       []string
	at          []time.Time
	refuse      string // when set, every Replay is refused with this FailedPrecondition message
	failReplays bool
	supersede   bool // when set, every Replay answers that a newer event superseded the event
	tracer      trace.Tracer
	wg          sync.WaitGroup
}

func startFakeSource(t *testing.T) *fakeSource {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	f := &fakeSource{addr: lis.Addr().String()}
	srv := grpc.NewServer()
	katastromav1.RegisterSourceHandlerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); f.wg.Wait() })
	return f
}

// setTracer points the replays' spans at a pharos; nil makes Replay wait until the next one is set (a restarted
// pharos may replay before the test knows its address).
func (f *fakeSource) setTracer(tr trace.Tracer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tracer = tr
}

func (f *fakeSource) waitTracer(ctx context.Context) (trace.Tracer, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		tr := f.tracer
		f.mu.Unlock()
		if tr != nil {
			return tr, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (f *fakeSource) Replay(ctx context.Context, req *katastromav1.ReplayRequest) (*katastromav1.ReplayResponse, error) {
	tracer, err := f.waitTracer(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req.GetEventId())
	f.at = append(f.at, time.Now())
	if f.refuse != "" {
		return nil, status.Error(grpccodes.FailedPrecondition, f.refuse)
	}
	if f.supersede {
		return nil, stage.Superseded("event " + req.GetEventId() + " was superseded by a newer event")
	}
	_, span := tracer.Start(context.Background(), RootSpanName, trace.WithNewRoot(),
		trace.WithAttributes(attribute.String(AttrReplayOf, req.GetEventId())))
	failReplay := f.failReplays
	f.wg.Go(func() {
		if failReplay {
			span.SetStatus(codes.Error, "provisioner: denied again")
		}
		span.End()
	})
	return &katastromav1.ReplayResponse{EventId: span.SpanContext().TraceID().String()}, nil
}

func (f *fakeSource) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// tracerTo returns a gitops tracer whose spans a real OTel SDK exporter sends to pharos; the resource names the
// fake source handler as the events' origin, as OTEL_RESOURCE_ATTRIBUTES does in a deployment.
func tracerTo(t *testing.T, exp sdktrace.SpanExporter, sourceAddr string) trace.Tracer {
	t.Helper()
	res := resource.NewSchemaless(attribute.String("service.name", "katastroma-source"),
		attribute.String(AttrSourceAddress, sourceAddr))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer(stage.TracerName)
}

func grpcExporter(t *testing.T, p *Pharos) sdktrace.SpanExporter {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(p.GRPCAddr()),
		otlptracegrpc.WithInsecure())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return exp
}

func httpExporter(t *testing.T, p *Pharos) sdktrace.SpanExporter {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(p.HTTPAddr()),
		otlptracehttp.WithInsecure())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return exp
}

// testOptions configures a quick pharos that trusts the given source handlers (the fake ones of the test).
func testOptions(sourceHandlers ...string) Options {
	return Options{Config: Config{CrashTimeout: time.Hour, ReplayLimit: 3, BackoffBase: 50 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Tick: 20 * time.Millisecond, Logger: logr.Discard(), SourceHandlers: sourceHandlers}
}

// startPharos runs pharos until the test ends (or until the returned stop is called).
func startPharos(t *testing.T, o Options) (*Pharos, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, o)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			NewWithT(t).Expect(p.Wait()).To(Succeed())
		})
	}
	t.Cleanup(stop)
	return p, stop
}

// failingEvent records an event whose source_target fails, as the source handler does: the child ends ERROR,
// then the root.
func failingEvent(tr trace.Tracer) string {
	ctx, root := tr.Start(context.Background(), RootSpanName, trace.WithNewRoot())
	_, child := tr.Start(ctx, SourceTargetSpanName)
	child.SetStatus(codes.Error, "provisioner: denied")
	child.End()
	root.SetStatus(codes.Error, "tenant-a/app: provisioner: denied")
	root.End()
	return root.SpanContext().TraceID().String()
}

func TestErrorSpanReplaysOnce(t *testing.T) {
	for name, exporter := range map[string]func(*testing.T, *Pharos) sdktrace.SpanExporter{
		"otlp-grpc": grpcExporter, "otlp-http-protobuf": httpExporter} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			src := startFakeSource(t)
			p, _ := startPharos(t, testOptions(src.addr))
			tr := tracerTo(t, exporter(t, p), src.addr)
			src.setTracer(tr)

			id := failingEvent(tr)
			g.Eventually(src.Calls).Should(Equal([]string{id}))
			g.Eventually(func(g Gomega) {
				e := eventOf(g, p, id)
				g.Expect(e.State).To(Equal(Done), "the replay succeeded")
			}).Should(Succeed())
			g.Consistently(src.Calls, 300*time.Millisecond).Should(HaveLen(1))
		})
	}
}

func eventOf(g Gomega, p *Pharos, id string) Event {
	for _, e := range p.Events() {
		if e.ID == id {
			return e
		}
	}
	g.Expect(id).To(BeEmpty(), "pharos does not track event %s", id)
	return Event{}
}

func TestOTLPJSONOverHTTP(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	o := testOptions(src.addr)
	o.MaxBodyBytes = 4096
	p, _ := startPharos(t, o)
	src.setTracer(tracerTo(t, httpExporter(t, p), src.addr))
	body := strings.ReplaceAll(otlpJSON, "10.0.0.7:50051", src.addr)
	url := "http://" + p.HTTPAddr() + "/v1/traces"

	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	_ = resp.Body.Close()
	g.Eventually(src.Calls).Should(Equal([]string{"5b8efff798038103d269b633813fc60c"}))

	for _, c := range []struct {
		contentType string
		body        []byte
		code        int
	}{
		{"text/plain", []byte(body), http.StatusUnsupportedMediaType},
		{"application/json", bytes.Repeat([]byte(" "), 5000), http.StatusRequestEntityTooLarge},
		{"application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`), http.StatusBadRequest},
		{"application/x-protobuf", []byte{0xff, 0xff}, http.StatusBadRequest},
	} {
		resp, err := http.Post(url, c.contentType, bytes.NewReader(c.body))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(c.code), "%s %q", c.contentType, c.body[:min(len(c.body), 40)])
		_ = resp.Body.Close()
	}
}

func TestCrashDetectionReplaysUnfinishedEvent(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	o := testOptions(src.addr)
	o.CrashTimeout = 500 * time.Millisecond
	p, _ := startPharos(t, o)
	tr := tracerTo(t, grpcExporter(t, p), src.addr)
	src.setTracer(tr)

	// The source handler died mid-event: only a downstream stage's span ended; the root never will.
	ctx, root := tr.Start(context.Background(), RootSpanName, trace.WithNewRoot())
	_, render := tr.Start(ctx, "render")
	render.End()
	id := root.SpanContext().TraceID().String()
	var since time.Time
	g.Eventually(func(g Gomega) { since = eventOf(g, p, id).Since }).Should(Succeed())

	g.Eventually(src.Calls).Should(Equal([]string{id}))
	src.mu.Lock()
	waited := src.at[0].Sub(since)
	src.mu.Unlock()
	g.Expect(waited).To(BeNumerically(">=", o.CrashTimeout), "replayed only after the crash timeout")
	g.Eventually(func(g Gomega) { g.Expect(eventOf(g, p, id).State).To(Equal(Done)) }).Should(Succeed())
}

func TestReplayLimitStopsWithReason(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	src.failReplays = true
	o := testOptions(src.addr)
	o.ReplayLimit = 2
	p, _ := startPharos(t, o)
	tr := tracerTo(t, grpcExporter(t, p), src.addr)
	src.setTracer(tr)
	before := testutil.ToFloat64(gaveUp.WithLabelValues(""))

	id := failingEvent(tr)
	g.Eventually(func(g Gomega) {
		e := eventOf(g, p, id)
		g.Expect(e.State).To(Equal(GaveUp))
		g.Expect(e.Reason).To(Equal("replay limit 2 reached; last failure: provisioner: denied again"))
	}).Should(Succeed())
	g.Expect(src.Calls()).To(Equal([]string{id, id}))
	g.Consistently(src.Calls, 300*time.Millisecond).Should(HaveLen(2))
	g.Expect(testutil.ToFloat64(gaveUp.WithLabelValues("")) - before).To(Equal(1.0))

	src.mu.Lock()
	gap := src.at[1].Sub(src.at[0])
	src.mu.Unlock()
	g.Expect(gap).To(BeNumerically(">=", o.BackoffBase), "the second replay waited for the backoff")
}

// A newer event took the source target over: the answer is final, not a refusal to count and retry.
func TestSupersededReplayIsFinal(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	src.supersede = true
	o := testOptions(src.addr)
	p, _ := startPharos(t, o)
	tr := tracerTo(t, grpcExporter(t, p), src.addr)
	src.setTracer(tr)

	id := failingEvent(tr)
	g.Eventually(func(g Gomega) {
		e := eventOf(g, p, id)
		g.Expect(e.State).To(Equal(State("superseded")))
		g.Expect(e.Reason).To(ContainSubstring("superseded by a newer event"))
	}).Should(Succeed())
	g.Consistently(src.Calls, 3*o.BackoffBase).Should(Equal([]string{id}))
	g.Expect(eventOf(g, p, id).Replays).To(BeZero(), "a superseded answer is no replay")
}
