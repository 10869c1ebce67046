package stage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// stageTokens stands in for the API server's TokenReview: the Platform in namespace plat has stage tokens, so has
// the Platform in namespace other.
func stageTokens(_ context.Context, token string) (string, error) {
	users := map[string]string{
		"plat-source":   "system:serviceaccount:plat:katastroma-source",
		"plat-labeler":  "system:serviceaccount:plat:katastroma-labeler",
		"other-labeler": "system:serviceaccount:other:katastroma-labeler",
	}
	if u, ok := users[token]; ok {
		return u, nil
	}
	return "", errors.New("the token is not valid")
}

// streamCall opens each stage's streaming RPC with the baggage of pc and the token, sends nothing and returns how
// the stage answered: the authentication and the namespace check run before any message.
var streamCall = map[string]func(ctx context.Context, conn *grpc.ClientConn) error{
	runner.Renderer: func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := katastromav1.NewRendererServiceClient(conn).RenderStream(ctx)
		if err != nil {
			return err
		}
		_ = s.CloseSend()
		_, err = s.Recv()
		return err
	},
	runner.Orderer: func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := katastromav1.NewOrdererServiceClient(conn).OrderStream(ctx)
		if err != nil {
			return err
		}
		_ = s.CloseSend()
		_, err = s.Recv()
		return err
	},
	runner.Labeler: func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := katastromav1.NewLabelerServiceClient(conn).LabelStream(ctx)
		if err != nil {
			return err
		}
		_ = s.CloseSend()
		_, err = s.Recv()
		return err
	},
}

// TestStagesAcceptOnlyTheirPlatformsStagesAndServedNamespaces: the renderer, orderer and labeler, run as the
// katastroma command runs them, refuse a call without a token and one with another Platform's stage token; with
// their own Platform's token they still refuse work whose baggage names a namespace the Platform does not serve
// (another tenant's, one the tenant never claimed, the Platform's own, or none), and take the served one.
func TestStagesAcceptOnlyTheirPlatformsStagesAndServedNamespaces(t *testing.T) {
	served := map[string]string{"team-a-prod": "team-a"} // namespace → tenant
	for _, name := range []string{runner.Renderer, runner.Orderer, runner.Labeler} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			auth := &stage.Authenticator{Review: stageTokens, Namespaces: []string{"plat"},
				Served: func(_ context.Context, ns, tenant string) error {
					if served[ns] != tenant {
						return fmt.Errorf("%s is not %s's", ns, tenant)
					}
					return nil
				}}
			r, err := runner.Start(ctx, name, runner.Options{GRPCAddr: "127.0.0.1:0",
				Connection: stage.Connection{Auth: auth}})
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { cancel(); _ = r.Wait() }()

			call := func(token string, pc pipeline.Context) codes.Code {
				c := stage.Connection{}
				if token != "" {
					c.TokenFile = filepath.Join(t.TempDir(), "token")
					g.Expect(os.WriteFile(c.TokenFile, []byte(token), 0o600)).To(Succeed())
				}
				conn, err := stage.DialWith(r.GRPCAddr, c)
				g.Expect(err).NotTo(HaveOccurred())
				defer func() { _ = conn.Close() }()
				cctx, err := pipeline.WithContext(ctx, pc)
				g.Expect(err).NotTo(HaveOccurred())
				return status.Code(streamCall[name](cctx, conn))
			}
			work := pipeline.Context{Tenant: "team-a", Namespace: "team-a-prod", SourceTarget: "web"}
			g.Expect(call("", work)).To(Equal(codes.Unauthenticated), "no token")
			g.Expect(call("forged", work)).To(Equal(codes.Unauthenticated), "a token the API server rejects")
			g.Expect(call("other-labeler", work)).To(Equal(codes.PermissionDenied), "another Platform's stage")
			for what, pc := range map[string]pipeline.Context{
				"another tenant's namespace":  {Tenant: "team-a", Namespace: "team-b-prod", SourceTarget: "web"},
				"the namespace for a tenant":  {Tenant: "team-b", Namespace: "team-a-prod", SourceTarget: "web"},
				"the Platform's own":          {Tenant: "team-a", Namespace: "plat", SourceTarget: "web"},
				"no namespace in the baggage": {},
			} {
				g.Expect(call("plat-source", pc)).To(Equal(codes.PermissionDenied), what)
			}
			got := call("plat-source", work)
			g.Expect(got).NotTo(BeElementOf(codes.PermissionDenied, codes.Unauthenticated), "the served namespace")
		})
	}
}

// TestKubeServedNeedsTheTenantsClaim: a namespace is served for a tenant only when it carries the tenant's label
// and the Tenant lists it in its status; a label alone (anyone creating a namespace can set it), a Tenant that
// lists another namespace, another tenant's label and the Platform's namespace are refused.
func TestKubeServedNeedsTheTenantsClaim(t *testing.T) {
	g := NewWithT(t)
	ns := func(name, tenant string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{gitopsv1alpha1.LabelTenant: tenant}}}
	}
	tenant := &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec:   gitopsv1alpha1.TenantSpec{Namespaces: []string{"team-a-prod", "team-a-dev"}},
		Status: gitopsv1alpha1.TenantStatus{Namespaces: []string{"team-a-prod", "plat"}}}
	c := fake.NewClientBuilder().WithScheme(operator.NewScheme()).WithObjects(ns("team-a-prod", "team-a"),
		ns("team-a-dev", "team-a"), ns("squatted", "team-a"), ns("team-b-prod", "team-b"), ns("plat", "team-a"),
		tenant).WithStatusSubresource(&gitopsv1alpha1.Tenant{}).Build()
	served := stage.KubeServed(client.Reader(c), []string{"plat"})
	ctx := context.Background()
	g.Expect(served(ctx, "team-a-prod", "team-a")).To(Succeed())
	g.Expect(served(ctx, "team-a-dev", "team-a")).To(MatchError(ContainSubstring("has not claimed it")), "not set up yet")
	g.Expect(served(ctx, "squatted", "team-a")).To(MatchError(ContainSubstring("has not claimed it")), "a label alone")
	g.Expect(served(ctx, "team-b-prod", "team-a")).To(MatchError(ContainSubstring(`labelled katastroma.org/tenant="team-b"`)))
	g.Expect(served(ctx, "team-a-prod", "team-b")).To(MatchError(ContainSubstring("not for tenant team-b")))
	g.Expect(served(ctx, "plat", "team-a")).To(MatchError(ContainSubstring("the Platform's own namespace")))
	g.Expect(served(ctx, "missing", "team-a")).To(MatchError(ContainSubstring("reading the namespace")))
}
