package stage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Stage-to-stage authentication. Every stage (and pharos, and the collector sending pharos spans) sends, per call,
// the projected ServiceAccount token Kubernetes mounts for it with the audience Audience; a listener with an
// Authenticator — every stage's gRPC server and both of pharos's OTLP ports — accepts a call only when the API
// server authenticates that token (TokenReview, audience-bound, so a token for anything else is useless here) as a
// stage ServiceAccount (katastroma-*) of its own Platform's namespace. Answers are cached for ReviewTTL, so a
// stream costs one review per token and TTL, not one per call. A pipeline stage then checks that the work (the
// namespace and tenant of the call's pipeline baggage) is for a namespace its Platform serves (Served).

// Audience is the audience of the tokens stages send each other.
const Audience = "katastroma-stage"

// ReviewTTL is how long a token review is trusted (projected tokens live an hour or more).
const ReviewTTL = time.Minute

// stageAccountPrefix starts every stage ServiceAccount's name (platform.Name).
const stageAccountPrefix = "katastroma-"

// Authenticator checks the token of every incoming stage call.
type Authenticator struct {
	// Review authenticates a token for Audience and returns the user name (TokenReview; see KubeReview).
	Review func(ctx context.Context, token string) (string, error)
	// Namespaces are the namespaces whose stage ServiceAccounts may call: the Platform's.
	Namespaces []string
	// Served, when set, checks that a namespace is one the Platform serves for tenant (KubeServed): every call
	// must then carry pipeline baggage naming such a namespace and its tenant, or it is refused
	// (PermissionDenied) before the stage does any work. Unset for the source handler, whose RPCs name targets it
	// reads itself, and pharos, which takes spans.
	Served func(ctx context.Context, namespace, tenant string) error

	mu     sync.Mutex
	cache  map[[32]byte]review
	served map[string]time.Time // namespace/tenant answers Served accepted, and when
}

type review struct {
	user string
	err  error
	at   time.Time
}

// KubeReview is a Review through the API server's TokenReview with Audience.
func KubeReview(c client.Client) func(ctx context.Context, token string) (string, error) {
	return func(ctx context.Context, token string) (string, error) {
		tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}
		if err := c.Create(ctx, tr); err != nil {
			return "", fmt.Errorf("the token could not be reviewed: %w", err)
		}
		if !tr.Status.Authenticated || !slices.Contains(tr.Status.Audiences, Audience) {
			return "", errors.New("the token is not valid for audience " + Audience)
		}
		return tr.Status.User.Username, nil
	}
}

// check authenticates and authorises the gRPC call in ctx.
func (a *Authenticator) check(ctx context.Context, method string) error {
	if isHealth(method) {
		return nil // the kubelet's probes carry no token
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var token string
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			token = t
		}
	}
	if err := a.authenticate(ctx, token); err != nil {
		return err
	}
	return a.checkServed(ctx, pipeline.FromContext(ctx))
}

// authenticate checks that token is a stage token of this Platform: Unauthenticated without a token or with one
// the API server does not authenticate for Audience, PermissionDenied for anyone else's.
func (a *Authenticator) authenticate(ctx context.Context, token string) error {
	if token == "" {
		return status.Error(codes.Unauthenticated, "a stage call needs a ServiceAccount token (authorization: Bearer) for audience "+Audience)
	}
	user, err := a.reviewed(ctx, token)
	if err != nil {
		return status.Error(codes.Unauthenticated, err.Error())
	}
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	ns, name, _ := strings.Cut(rest, ":")
	if !ok || !strings.HasPrefix(name, stageAccountPrefix) || !slices.Contains(a.Namespaces, ns) {
		return status.Errorf(codes.PermissionDenied, "%s is not a stage of this Platform (stage ServiceAccounts %s* of %s)",
			user, stageAccountPrefix, strings.Join(a.Namespaces, ", "))
	}
	return nil
}

// checkServed refuses work for a namespace the Platform does not serve (or naming none) when Served is set.
// Accepted answers are cached for ReviewTTL; refusals are asked again, so a namespace claimed a moment ago works
// at once.
func (a *Authenticator) checkServed(ctx context.Context, pc pipeline.Context) error {
	if a.Served == nil {
		return nil
	}
	if pc.Namespace == "" || pc.Tenant == "" {
		return status.Error(codes.PermissionDenied, "stage work must name its namespace and tenant (pipeline baggage)")
	}
	key := pc.Namespace + "/" + pc.Tenant
	a.mu.Lock()
	at, ok := a.served[key]
	a.mu.Unlock()
	if ok && time.Since(at) < ReviewTTL {
		return nil
	}
	if err := a.Served(ctx, pc.Namespace, pc.Tenant); err != nil {
		return status.Errorf(codes.PermissionDenied, "namespace %s (tenant %s) is not served by this Platform: %v",
			pc.Namespace, pc.Tenant, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.served == nil || len(a.served) > 1024 {
		a.served = map[string]time.Time{}
	}
	a.served[key] = time.Now()
	return nil
}

// WithoutServed is an Authenticator for the same callers that does not check the work's namespace (the source
// handler's server, whose RPCs carry no pipeline baggage).
func (a *Authenticator) WithoutServed() *Authenticator {
	return &Authenticator{Review: a.Review, Namespaces: a.Namespaces}
}

// UnaryInterceptor authenticates the unary calls of a gRPC server that is no stage.Server (pharos's OTLP/gRPC
// receiver); NewWith installs it itself.
func (a *Authenticator) UnaryInterceptor() grpc.UnaryServerInterceptor { return a.unary }

// StreamInterceptor authenticates the streaming calls of such a server.
func (a *Authenticator) StreamInterceptor() grpc.StreamServerInterceptor { return a.stream }

// HTTP authenticates every request to next but the paths in open (health checks): 401 without a valid token for
// Audience, 403 for a token of anyone but this Platform's stages.
func (a *Authenticator) HTTP(next http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(open, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if err := a.authenticate(r.Context(), token); err != nil {
			code := http.StatusForbidden
			if status.Code(err) == codes.Unauthenticated {
				code = http.StatusUnauthorized
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+Audience+`"`)
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Authenticator) reviewed(ctx context.Context, token string) (string, error) {
	key := sha256.Sum256([]byte(token))
	a.mu.Lock()
	if r, ok := a.cache[key]; ok && time.Since(r.at) < ReviewTTL {
		a.mu.Unlock()
		return r.user, r.err
	}
	a.mu.Unlock()
	user, err := a.Review(ctx, token)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache == nil || len(a.cache) > 1024 {
		a.cache = map[[32]byte]review{} // tokens rotate; a small, simply reset cache is enough
	}
	a.cache[key] = review{user: user, err: err, at: time.Now()}
	return user, err
}

func (a *Authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (a *Authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// tokenFile sends the projected token at path with every call, re-read when the kubelet rotates it.
type tokenFile struct {
	path string
	mu   sync.Mutex
	tok  string
	read time.Time
}

func (t *tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok == "" || time.Since(t.read) > ReviewTTL/2 {
		b, err := os.ReadFile(t.path)
		if err != nil {
			return nil, fmt.Errorf("reading the stage token: %w", err)
		}
		t.tok, t.read = strings.TrimSpace(string(b)), time.Now()
	}
	return map[string]string{"authorization": "Bearer " + t.tok}, nil
}

// RequireTransportSecurity is false: the stages talk in-cluster without TLS; the token is audience-bound and
// short-lived, and the NetworkPolicy keeps other pods off the port.
func (*tokenFile) RequireTransportSecurity() bool { return false }
