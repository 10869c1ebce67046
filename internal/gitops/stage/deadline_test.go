package stage_test

import (
	"context"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// hangingLabeler accepts every Label stream and never answers, like a downstream stuck on a dead dependency.
type hangingLabeler struct {
	katastromav1.UnimplementedLabelerServiceServer
}

func (hangingLabeler) Label(stream grpc.ClientStreamingServer[katastromav1.Manifest, katastromav1.StageSummary]) error {
	<-stream.Context().Done()
	return stream.Context().Err()
}

// The orderer forwards to a labeler that never answers; the caller sets no deadline (as the source handler did).
// The orderer's own deadline must end the call with an error that says so, instead of hanging.
func TestStageWhoseDownstreamHangsFailsWithinTheDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	hang := grpc.NewServer()
	katastromav1.RegisterLabelerServiceServer(hang, hangingLabeler{})
	go func() { _ = hang.Serve(lis) }()
	defer hang.Stop()

	const deadline = 500 * time.Millisecond
	ord, err := runner.Start(ctx, runner.Orderer, runner.Options{GRPCAddr: "127.0.0.1:0", Next: lis.Addr().String(),
		Connection: stage.Connection{RPCTimeout: deadline}})
	g.Expect(err).NotTo(HaveOccurred())
	conn, err := grpc.NewClient(ord.GRPCAddr, grpc.WithTransportCredentials(insecureCreds()))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	m, err := pipeline.Encode(configMap("a"))
	g.Expect(err).NotTo(HaveOccurred())

	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := stage.Forward(ctx, katastromav1.NewOrdererServiceClient(conn).Order, []*katastromav1.Manifest{m})
		errc <- err
	}()
	var got error
	g.Eventually(errc).WithTimeout(10*time.Second).Should(Receive(&got), "the call hangs: no deadline")
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	g.Expect(status.Code(got)).To(Equal(codes.DeadlineExceeded))
	g.Expect(got.Error()).To(ContainSubstring("--rpc-timeout"))
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
