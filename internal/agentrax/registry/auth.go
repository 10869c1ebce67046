package registry

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrUnauthenticated is returned when a write carries no valid bearer token; ErrForbidden when the token is
// valid but its identity may not write.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Identity is who makes a write and where it may write.
type Identity struct {
	// User names the caller (a ServiceAccount's username, "secret:<ns>/<name>", "static-token").
	User string
	// Namespace, when set, is the only namespace whose entries the caller may write: a ServiceAccount writes
	// the agents of its own namespace unless it is listed as cluster-wide. Empty means every namespace.
	Namespace string
}

// MayWrite reports whether the identity may create, update or delete entries of namespace ns.
func (id Identity) MayWrite(ns string) bool { return id.Namespace == "" || id.Namespace == ns }

// Authenticator decides whether a write request may proceed. It returns the caller's identity; what the
// identity may write is checked against the entry's namespace by the API.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Identity, error)
}

// bearerToken extracts the token of an `Authorization: Bearer` header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// SecretToken accepts the token stored in a Secret key. The Secret is read on each write through the given
// reader (the manager's cache in the operator), so rotating it needs no restart.
type SecretToken struct {
	Reader client.Reader
	Secret types.NamespacedName
	Key    string // "token" when empty
}

// Authenticate compares in constant time. The Secret's holder is an administrator: it writes in every
// namespace.
func (s *SecretToken) Authenticate(ctx context.Context, token string) (Identity, error) {
	var sec corev1.Secret
	if err := s.Reader.Get(ctx, s.Secret, &sec); err != nil {
		return Identity{}, fmt.Errorf("reading the registry token secret: %w", err)
	}
	key := s.Key
	if key == "" {
		key = "token"
	}
	want := []byte(strings.TrimSpace(string(sec.Data[key])))
	if len(want) == 0 || subtle.ConstantTimeCompare(want, []byte(token)) != 1 {
		return Identity{}, ErrUnauthenticated
	}
	return Identity{User: "secret:" + s.Secret.String()}, nil
}

// TokenReviewer is the part of the Kubernetes API the TokenReview authenticator needs (a controller-runtime
// client satisfies it; TokenReview is create-only).
type TokenReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// TokenReview accepts a Kubernetes ServiceAccount token that the API server validates, when the
// ServiceAccount is listed. A ServiceAccount in Allowed writes only the entries of its own namespace (an
// orchestrator of team-a cannot hide or hijack team-b's agents); one in ClusterWide writes everywhere.
type TokenReview struct {
	Client TokenReviewer
	// Allowed lists ServiceAccounts ("namespace/name") that write in their own namespace.
	Allowed []string
	// ClusterWide lists ServiceAccounts ("namespace/name") that write in every namespace.
	ClusterWide []string
	// Audiences, when set, are requested in the review: the token must have been issued for one of them
	// (`kubectl create token <sa> --audience agentrax-registry`), so a token meant for the registry is
	// useless against the API server and an API server token is refused here. Empty accepts tokens of the
	// API server's own audience.
	Audiences []string
}

// Authenticate sends a TokenReview and checks the reviewed user and audience.
func (t *TokenReview) Authenticate(ctx context.Context, token string) (Identity, error) {
	tr := &authenticationv1.TokenReview{
		ObjectMeta: metav1.ObjectMeta{},
		Spec:       authenticationv1.TokenReviewSpec{Token: token, Audiences: t.Audiences},
	}
	if err := t.Client.Create(ctx, tr); err != nil {
		return Identity{}, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return Identity{}, ErrUnauthenticated
	}
	// An API server that is not audience-aware answers with no audiences; the token's audience is then
	// unknown and it is refused (the API documents that clients must check this).
	if len(t.Audiences) > 0 && !slices.ContainsFunc(tr.Status.Audiences, func(a string) bool {
		return slices.Contains(t.Audiences, a)
	}) {
		return Identity{}, ErrUnauthenticated
	}
	user := tr.Status.User.Username
	id := Identity{User: user}
	rest, isSA := strings.CutPrefix(user, "system:serviceaccount:")
	ns, name, ok := strings.Cut(rest, ":")
	if !isSA || !ok {
		return id, ErrForbidden
	}
	switch sa := ns + "/" + name; {
	case slices.Contains(t.ClusterWide, sa):
		return id, nil
	case slices.Contains(t.Allowed, sa):
		id.Namespace = ns
		return id, nil
	}
	return id, ErrForbidden
}

// AnyOf tries authenticators in order; the first success wins. A forbidden identity stays forbidden.
type AnyOf []Authenticator

// Authenticate returns the first success, else the most telling failure.
func (a AnyOf) Authenticate(ctx context.Context, token string) (Identity, error) {
	err := ErrUnauthenticated
	for _, au := range a {
		id, aerr := au.Authenticate(ctx, token)
		if aerr == nil {
			return id, nil
		}
		if errors.Is(aerr, ErrForbidden) || !errors.Is(err, ErrForbidden) {
			err = aerr
		}
	}
	return Identity{}, err
}

// StaticToken accepts one fixed token (from a flag or file, for `make dev` and tests).
type StaticToken string

// Authenticate compares in constant time; an empty StaticToken accepts nothing. Its holder writes everywhere.
func (s StaticToken) Authenticate(_ context.Context, token string) (Identity, error) {
	if s == "" || subtle.ConstantTimeCompare([]byte(s), []byte(token)) != 1 {
		return Identity{}, ErrUnauthenticated
	}
	return Identity{User: "static-token"}, nil
}
