package stage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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
)

// Stage-to-stage authentication. Every stage sends, per call, the projected ServiceAccount token Kubernetes
// mounts for it with the audience Audience; a stage with an Authenticator accepts a call only when the API server
// authenticates that token (TokenReview, audience-bound, so a token for anything else is useless here) as a
// stage ServiceAccount (katastroma-*) of the namespaces it serves — its own Platform's. Answers are cached for
// ReviewTTL, so a stream costs one review per token and TTL, not one per call.

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

	mu    sync.Mutex
	cache map[[32]byte]review
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

// check authenticates and authorises the call in ctx.
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
