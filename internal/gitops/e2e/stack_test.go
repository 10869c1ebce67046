package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pharos"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// pharosName names the pharos process in a stack.
const pharosName = "pharos"

// otlpSpan is one exported span with the service that exported it.
type otlpSpan struct {
	service, name, traceID string
	errored                bool
}

// collector is an OTLP/gRPC trace receiver: the separate stage processes export their spans to it. With forward
// set it passes every request on, as an OTel Collector's routing pipeline passes gitops spans to pharos.
type collector struct {
	collectortracev1.UnimplementedTraceServiceServer
	forward collectortracev1.TraceServiceClient
	mu      sync.Mutex
	spans   []otlpSpan
}

func (c *collector) Export(ctx context.Context, req *collectortracev1.ExportTraceServiceRequest) (
	*collectortracev1.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, otlpSpan{service: service, name: s.GetName(),
					traceID: hex.EncodeToString(s.GetTraceId()), errored: s.GetStatus().GetCode() == tracev1.Status_STATUS_CODE_ERROR})
			}
		}
	}
	c.mu.Unlock()
	if c.forward != nil {
		// A failed forward fails the export, so the exporter's retry delivers it again, like a collector's queue.
		return c.forward.Export(ctx, req)
	}
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

// trace returns the spans of one trace.
func (c *collector) trace(id string) []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []otlpSpan
	for _, s := range c.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	return out
}

// stageTraces counts the distinct traces holding a stage span (the otelgrpc spans aside).
func (c *collector) stageTraces() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[string]bool{}
	for _, s := range c.spans {
		if s.name == "event" || s.name == "renderer" || s.name == "provisioner" || s.name == "pruner" {
			ids[s.traceID] = true
		}
	}
	return len(ids)
}

// buildKatastroma builds cmd/katastroma into dir (the build cache makes this mostly a link).
func buildKatastroma(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "katastroma")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/katastroma")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/katastroma:\n%s", out)
	return bin
}

type process struct {
	name string
	cmd  *exec.Cmd
	log  string
}

// stackOptions tunes a stack of katastroma processes.
type stackOptions struct {
	// args are extra flags per process name (a stage, or pharosName).
	args map[string][]string
	// pharos starts `katastroma pharos` and forwards every exported span to it.
	pharos bool
}

// stack is every stage as its own katastroma process on loopback ports, exporting spans over OTLP (real OTel SDK
// exporters) to an in-test collector, and optionally pharos behind that collector.
type stack struct {
	t          *testing.T
	dir, bin   string
	kubeconfig string
	col        *collector
	addr       map[string]string // gRPC address per stage; pharos's OTLP/gRPC address
	httpAddr   string
	webhookURL string
	opts       stackOptions

	mu    sync.Mutex
	procs map[string]*process
	logs  []string
}

func startStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	dir := t.TempDir()
	s := &stack{t: t, dir: dir, bin: buildKatastroma(t, dir), col: &collector{}, addr: map[string]string{},
		opts: o, procs: map[string]*process{}}
	kubeconfig, err := env.AddAdminKubeconfig("katastroma-processes")
	Expect(err).NotTo(HaveOccurred())
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(s.kubeconfig, kubeconfig, 0o600)).To(Succeed())

	names := append([]string{}, runner.Stages...)
	if o.pharos {
		names = append(names, pharosName, pharosName+"-http")
	}
	for _, name := range append(names, "webhook") {
		port, err := freePort()
		Expect(err).NotTo(HaveOccurred())
		s.addr[name] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	s.httpAddr, s.webhookURL = s.addr["webhook"], "http://"+s.addr["webhook"]

	otlpLis, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	otlp := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(otlp, s.col)
	go func() { _ = otlp.Serve(otlpLis) }()
	s.addr["collector"] = otlpLis.Addr().String()
	if o.pharos {
		conn, err := stage.Dial(s.addr[pharosName])
		Expect(err).NotTo(HaveOccurred())
		s.col.forward = collectortracev1.NewTraceServiceClient(conn)
		t.Cleanup(func() { _ = conn.Close() })
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.procs {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
		if t.Failed() {
			for _, l := range s.logs {
				out, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), out)
			}
		}
		otlp.Stop()
	})
	if o.pharos {
		s.start(pharosName)
	}
	for _, name := range runner.Stages {
		s.start(name)
	}
	for _, name := range runner.Stages {
		s.waitServing(name)
	}
	return s
}

// start starts (or restarts, on the same ports) one process.
func (s *stack) start(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var args []string
	switch name {
	case pharosName:
		args = []string{"pharos", "--otlp-grpc-address", s.addr[pharosName], "--otlp-http-address",
			s.addr[pharosName+"-http"], "--metrics-bind-address", "0", "--source-handlers", s.addr[runner.Source]}
	default:
		args = []string{name, "--grpc-bind-address", s.addr[name], "--metrics-bind-address", "0",
			"--otlp-endpoint", s.addr["collector"]}
		switch name {
		case runner.Source:
			args = append(args, "--next", s.addr[runner.Renderer], "--http-bind-address", s.httpAddr)
		case runner.Pruner:
			args = append(args, "--orderer", s.addr[runner.Orderer])
		default:
			args = append(args, "--next", s.addr[runner.Stages[indexOf(runner.Stages, name)+1]])
		}
	}
	args = append(args, s.opts.args[name]...)
	p := &process{name: name, log: filepath.Join(s.dir, fmt.Sprintf("%s-%d.log", name, len(s.logs)))}
	s.logs = append(s.logs, p.log)
	logFile, err := os.Create(p.log)
	Expect(err).NotTo(HaveOccurred())
	p.cmd = exec.Command(s.bin, args...)
	// A short batch delay so spans arrive while the test waits, not only at shutdown. The source handler names
	// its own gRPC address as the resource attribute pharos replays through, as the Platform sets it.
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_RESOURCE_ATTRIBUTES="+pharos.AttrSourceAddress+"="+s.addr[runner.Source],
		// The test git daemon listens on loopback (cmd/katastroma's RepositoryAllowForTestingEnv).
		"KATASTROMA_REPOSITORY_ALLOW_FOR_TESTING=127.0.0.1/32")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// The processes die with the test binary even when a timeout panic skips the cleanup.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(p.cmd.Start()).To(Succeed())
	_ = logFile.Close()
	s.procs[name] = p
}

func indexOf(list []string, v string) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

func (s *stack) proc(name string) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name]
}

// kill ends a process with SIGKILL, as a node failure or an OOM kill would: no drain, no span flush.
func (s *stack) kill(name string) {
	p := s.proc(name)
	Expect(p.cmd.Process.Kill()).To(Succeed())
	_ = p.cmd.Wait()
}

// signal sends sig to a process.
func (s *stack) signal(name string, sig syscall.Signal) {
	Expect(s.proc(name).cmd.Process.Signal(sig)).To(Succeed())
}

// waitServing waits for a stage's gRPC health SERVING (and the source handler's /healthz).
func (s *stack) waitServing(name string) {
	conn, err := stage.Dial(s.addr[name])
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	Eventually(func(g Gomega) {
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))
	}).Should(Succeed(), "stage %s", name)
	if name != runner.Source {
		return
	}
	Eventually(func(g Gomega) {
		resp, err := http.Get(s.webhookURL + "/healthz")
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).Should(Succeed())
}

// stopAll sends SIGTERM to every process and expects each to drain and exit 0 within 40s.
func (s *stack) stopAll() {
	s.mu.Lock()
	procs := make([]*process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	}
	for _, p := range procs {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		var err error
		Eventually(done, 40*time.Second).Should(Receive(&err))
		Expect(err).NotTo(HaveOccurred(), "katastroma %s exit", p.name)
	}
}
