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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// otlpSpan is one exported span with the service that exported it.
type otlpSpan struct {
	service, name, traceID string
	errored                bool
}

// collector is an OTLP/gRPC trace receiver: the separate stage processes export their spans to it.
type collector struct {
	collectortracev1.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []otlpSpan
}

func (c *collector) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (
	*collectortracev1.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// TestSeparateProcesses runs every stage as its own katastroma process talking over loopback gRPC, exporting
// spans over OTLP to an in-test collector, and drives a push that applies and one that prunes.
func TestSeparateProcesses(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	dir := t.TempDir()
	bin := buildKatastroma(t, dir)
	kubeconfig, err := env.AddAdminKubeconfig("katastroma-processes")
	Expect(err).NotTo(HaveOccurred())
	kubeconfigFile := filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(kubeconfigFile, kubeconfig, 0o600)).To(Succeed())

	col := &collector{}
	otlpLis, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	otlp := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(otlp, col)
	go func() { _ = otlp.Serve(otlpLis) }()
	defer otlp.Stop()

	addr := map[string]string{}
	for _, name := range runner.Stages {
		port, err := freePort()
		Expect(err).NotTo(HaveOccurred())
		addr[name] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	httpPort, err := freePort()
	Expect(err).NotTo(HaveOccurred())
	webhookURL := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	args := map[string][]string{
		runner.Source:      {"--next", addr[runner.Renderer], "--http-bind-address", fmt.Sprintf("127.0.0.1:%d", httpPort)},
		runner.Renderer:    {"--next", addr[runner.Orderer]},
		runner.Orderer:     {"--next", addr[runner.Labeler]},
		runner.Labeler:     {"--next", addr[runner.Provisioner]},
		runner.Provisioner: {"--next", addr[runner.Pruner]},
		runner.Pruner:      {"--orderer", addr[runner.Orderer]},
	}
	var procs []*process
	defer func() {
		for _, p := range procs {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
			if t.Failed() {
				out, _ := os.ReadFile(p.log)
				t.Logf("katastroma %s:\n%s", p.name, out)
			}
		}
	}()
	for _, name := range runner.Stages {
		p := &process{name: name, log: filepath.Join(dir, name+".log")}
		logFile, err := os.Create(p.log)
		Expect(err).NotTo(HaveOccurred())
		p.cmd = exec.Command(bin, append([]string{name, "--grpc-bind-address", addr[name],
			"--metrics-bind-address", "0", "--otlp-endpoint", otlpLis.Addr().String()}, args[name]...)...)
		// A short batch delay so spans arrive while the test waits, not only at shutdown.
		p.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigFile, "OTEL_BSP_SCHEDULE_DELAY=100")
		p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
		// The stages die with the test binary even when a timeout panic skips the deferred cleanup.
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		Expect(p.cmd.Start()).To(Succeed())
		_ = logFile.Close()
		procs = append(procs, p)
	}

	// Every stage answers gRPC health SERVING, the source handler also /healthz.
	for _, name := range runner.Stages {
		conn, err := stage.Dial(addr[name])
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))
		}).Should(Succeed(), "stage %s", name)
		_ = conn.Close()
	}
	Eventually(func(g Gomega) {
		resp, err := http.Get(webhookURL + "/healthz")
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).Should(Succeed())

	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha1, changed := r.commit(map[string]*string{
		"deploy/a.yaml": configMapYAML("a", "", "1"), "deploy/b.yaml": configMapYAML("b", "", "1")})
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	push := func(sha string, changed []string) string {
		code, resp := deliver(webhookURL, ns, r.pushPayload(sha, changed), webhookSecret, "push")
		Expect(code).To(Equal(http.StatusAccepted), "%v", resp)
		id := resp["event_id"].(string)
		Eventually(func(g Gomega) {
			tcm := mustCM(ctx, ns, "web")
			g.Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventID, id))
			g.Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, "succeeded"))
		}).Should(Succeed())
		return id
	}

	first := push(sha1, changed)
	a := mustCM(ctx, ns, "a")
	Expect(a.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha1))
	Expect(a.ManagedFields).To(ContainElement(HaveField("Manager", pipeline.FieldManager)))
	mustCM(ctx, ns, "b")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a", "ConfigMap/b"))

	sha2, changed := r.commit(map[string]*string{"deploy/b.yaml": nil})
	second := push(sha2, changed)
	_, err = getCM(ctx, ns, "b")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the removed manifest is pruned")
	Expect(mustCM(ctx, ns, "a").ResourceVersion).To(Equal(a.ResourceVersion), "an unchanged manifest is not rewritten")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a"))

	// One trace per event, crossing every process: each stage span comes from its own process.
	wantSpans := map[string]int{"event": 1, "source_target": 1, "renderer": 1, "orderer": 2, "labeler": 1,
		"provisioner": 1, "pruner": 1}
	for _, id := range []string{first, second} {
		Eventually(func(g Gomega) {
			got := map[string]int{}
			for _, s := range col.trace(id) {
				if _, ok := wantSpans[s.name]; !ok {
					continue // otelgrpc client/server spans
				}
				g.Expect(s.errored).To(BeFalse(), "span %s", s.name)
				want := "katastroma-" + s.name
				if s.name == "event" || s.name == "source_target" {
					want = "katastroma-" + runner.Source
				}
				g.Expect(s.service).To(Equal(want), "span %s", s.name)
				got[s.name]++
			}
			g.Expect(got).To(Equal(wantSpans))
		}).Should(Succeed(), "trace of event %s", id)
	}
	Expect(col.stageTraces()).To(Equal(2), "no stage span outside the two events' traces")

	// SIGTERM drains and stops every process cleanly.
	for _, p := range procs {
		Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	}
	for _, p := range procs {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		var err error
		Eventually(done, 40*time.Second).Should(Receive(&err))
		Expect(err).NotTo(HaveOccurred(), "katastroma %s exit", p.name)
		out, _ := os.ReadFile(p.log)
		Expect(strings.Contains(string(out), "stage running")).To(BeTrue(), "katastroma %s logged its start", p.name)
	}
}
