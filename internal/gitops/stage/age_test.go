package stage_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// A stage server ends connections older than MaxConnectionAge; the client then asks its resolver again, which is
// how a caller finds the pods a scaled-up headless Service gained.
func TestAgedConnectionsMakeTheCallerResolveAgain(t *testing.T) {
	g := NewWithT(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv := stage.NewWith("orderer", stage.Connection{MaxConnectionAge: 300 * time.Millisecond,
		MaxConnectionAgeGrace: 300 * time.Millisecond}, func(*grpc.Server) {})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(ctx, lis) }()

	var resolves atomic.Int32
	res := manual.NewBuilderWithScheme("katastroma-age")
	res.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: lis.Addr().String()}}})
	res.ResolveNowCallback = func(resolver.ResolveNowOptions) { resolves.Add(1) }
	conn, err := stage.DialWith(res.Scheme()+":///orderer", stage.Connection{}, grpc.WithResolvers(res))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(resolves.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">", 0))
}
