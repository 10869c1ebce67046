package stage

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// pingService is a one-method service standing in for a stage's.
var pingService = grpc.ServiceDesc{ServiceName: "test.Ping", HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Ping", Handler: func(srv any, ctx context.Context, dec func(any) error,
		ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Ping/Ping"},
			func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil })
	}}}}

// TestStageCallsNeedAPlatformStageToken: with authentication on, a stage accepts calls only with a token the API
// server authenticates (TokenReview, audience-bound) as a stage ServiceAccount of its own Platform's namespace;
// health checks (the kubelet's probes) need none.
func TestStageCallsNeedAPlatformStageToken(t *testing.T) {
	g := NewWithT(t)
	users := map[string]string{
		"source-token": "system:serviceaccount:plat:katastroma-source",
		"other-plat":   "system:serviceaccount:elsewhere:katastroma-source",
		"tenant-token": "system:serviceaccount:plat:provisioner",
	}
	reviews := 0
	auth := &Authenticator{Namespaces: []string{"plat"}, Review: func(_ context.Context, token string) (string, error) {
		reviews++
		if u, ok := users[token]; ok {
			return u, nil
		}
		return "", errors.New("the token is not valid")
	}}
	srv := NewWith("renderer", Connection{Auth: auth}, func(s *grpc.Server) { s.RegisterService(&pingService, struct{}{}) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = srv.Serve(ctx, lis) }()

	call := func(token string) error {
		c := Connection{}
		if token != "" {
			path := filepath.Join(t.TempDir(), "token")
			g.Expect(os.WriteFile(path, []byte(token+"\n"), 0o600)).To(Succeed())
			c.TokenFile = path
		}
		conn, err := DialWith(lis.Addr().String(), c)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return err // the probe path must always work
		}
		return conn.Invoke(ctx, "/test.Ping/Ping", &emptypb.Empty{}, &emptypb.Empty{})
	}
	g.Expect(status.Code(call(""))).To(Equal(codes.Unauthenticated), "no token")
	g.Expect(status.Code(call("forged"))).To(Equal(codes.Unauthenticated), "a token the API server rejects")
	g.Expect(status.Code(call("other-plat"))).To(Equal(codes.PermissionDenied), "another Platform's stage")
	g.Expect(status.Code(call("tenant-token"))).To(Equal(codes.PermissionDenied), "a tenant identity")
	g.Expect(call("source-token")).To(Succeed())
	before := reviews
	g.Expect(call("source-token")).To(Succeed())
	g.Expect(reviews).To(Equal(before), "a reviewed token is cached")
}
