package stage_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// A client pinging as often as grpc-go allows (every 10 s) on an idle connection is admitted by a stage server:
// with grpc's default enforcement (pings at most every 5 min, none without a stream) the server would answer the
// fourth ping (40 s) with GOAWAY too_many_pings and the connection would drop. It runs for 50 s, in parallel.
func TestStageServersAdmitTheClientsKeepalivePings(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv := stage.NewWith("orderer", stage.Connection{}, func(*grpc.Server) {})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	lis := &countingListener{Listener: l}
	go func() { _ = srv.Serve(ctx, lis) }()

	conn, err := stage.DialWith(lis.Addr().String(), stage.Connection{KeepaliveTime: 10 * time.Second,
		KeepaliveTimeout: 5 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	// A connection the server closed is dialled again at once, so count connections rather than watch the state.
	g.Consistently(lis.accepted.Load).WithTimeout(50 * time.Second).WithPolling(200 * time.Millisecond).
		Should(BeEquivalentTo(1))
	g.Expect(conn.GetState()).To(Equal(connectivity.Ready))
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}
