package stage_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// childEnv makes the test binary run one real stage instead of the tests: each replica of a stage is then its own
// process with its own listener and metrics, as a pod would be.
const childEnv = "KATASTROMA_TEST_REPLICA_STAGE"

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		if err := runReplica(name); err != nil {
			fmt.Fprintln(os.Stderr, "replica:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runReplica serves one stage on loopback until SIGTERM and prints "grpc=<addr> metrics=<addr>" once listening.
func runReplica(name string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	mlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	msrv := &http.Server{Handler: promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = msrv.Serve(mlis) }()
	defer func() { _ = msrv.Close() }()
	r, err := runner.Start(ctx, name, runner.Options{GRPCAddr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	fmt.Printf("grpc=%s metrics=%s\n", r.GRPCAddr, mlis.Addr())
	return r.Wait()
}

// replica is one stage process started by startReplica.
type replica struct {
	grpc, metrics string
}

// startReplica re-executes the test binary as one stage process; it is stopped (SIGTERM) when the test ends.
func startReplica(t *testing.T, name string) replica {
	t.Helper()
	g := NewWithT(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil { // a replica drains and exits 0 on SIGTERM, like a stage pod
				t.Errorf("replica %s: %v", name, err)
			}
		case <-time.After(30 * time.Second): // the drain is bounded; never leave a process behind
			_ = cmd.Process.Kill()
			t.Errorf("replica %s did not stop within 30s of SIGTERM (killed: %v)", name, <-done)
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "grpc=") {
				lines <- sc.Text()
			}
		}
	}()
	var line string
	g.Eventually(lines).WithTimeout(30 * time.Second).Should(Receive(&line))
	var r replica
	_, err = fmt.Sscanf(line, "grpc=%s metrics=%s", &r.grpc, &r.metrics)
	g.Expect(err).NotTo(HaveOccurred())
	return r
}

// handled scrapes a replica's katastroma_stage_rpcs_total for one method, summed over codes.
func handled(g Gomega, r replica, method string) float64 {
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, m := range families["katastroma_stage_rpcs_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && l.GetValue() == method {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// Three replicas of the orderer, each its own process, behind one name: a manual resolver stands in for the
// headless Service's DNS answer. Every replica must get work from one client connection (pick-first would pin
// every stream to the first address).
func TestOneConnectionSpreadsOverEveryReplica(t *testing.T) {
	g := NewWithT(t)
	var reps []replica
	var addrs []resolver.Address
	for range 3 {
		r := startReplica(t, runner.Orderer)
		reps = append(reps, r)
		addrs = append(addrs, resolver.Address{Addr: r.grpc})
	}
	res := manual.NewBuilderWithScheme("katastroma-test")
	res.InitialState(resolver.State{Addresses: addrs})
	conn, err := stage.DialWith(res.Scheme()+":///katastroma-orderer", stage.Connection{}, grpc.WithResolvers(res))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	orderer := katastromav1.NewOrdererServiceClient(conn)

	const method = "/katastroma.v1.OrdererService/OrderStream"
	m, err := pipeline.Encode(configMap("a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for range 6 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			stream, err := orderer.OrderStream(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			out, err := stage.Bidi(stream, []*katastromav1.Manifest{m})
			cancel()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(HaveLen(1))
		}
		for i, r := range reps {
			g.Expect(handled(g, r, method)).To(BeNumerically(">", 0), "replica %d (%s) got no stream", i, r.grpc)
		}
	}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func configMap(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("team")
	u.SetName(name)
	return u
}
