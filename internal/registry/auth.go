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

// Authenticator decides whether a write request may proceed. It returns the caller's identity.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (user string, err error)
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

// Authenticate compares in constant time.
func (s *SecretToken) Authenticate(ctx context.Context, token string) (string, error) {
	var sec corev1.Secret
	if err := s.Reader.Get(ctx, s.Secret, &sec); err != nil {
		return "", fmt.Errorf("reading the registry token secret: %w", err)
	}
	key := s.Key
	if key == "" {
		key = "token"
	}
	want := []byte(strings.TrimSpace(string(sec.Data[key])))
	if len(want) == 0 || subtle.ConstantTimeCompare(want, []byte(token)) != 1 {
		return "", ErrUnauthenticated
	}
	return "secret:" + s.Secret.String(), nil
}

// TokenReviewer is the part of the Kubernetes API the TokenReview authenticator needs (a controller-runtime
// client satisfies it; TokenReview is create-only).
type TokenReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// TokenReview accepts a Kubernetes token (a projected ServiceAccount token) that the API server validates,
// when its user is one of the allowed ServiceAccounts.
type TokenReview struct {
	Client TokenReviewer
	// Allowed lists ServiceAccounts as "namespace/name".
	Allowed []string
	// Audiences, when set, are requested in the review (the token must be issued for one of them).
	Audiences []string
}

// Authenticate sends a TokenReview and checks the reviewed user.
func (t *TokenReview) Authenticate(ctx context.Context, token string) (string, error) {
	tr := &authenticationv1.TokenReview{
		ObjectMeta: metav1.ObjectMeta{},
		Spec:       authenticationv1.TokenReviewSpec{Token: token, Audiences: t.Audiences},
	}
	if err := t.Client.Create(ctx, tr); err != nil {
		return "", fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return "", ErrUnauthenticated
	}
	user := tr.Status.User.Username
	ns, name, ok := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	if !ok || !strings.HasPrefix(user, "system:serviceaccount:") || !slices.Contains(t.Allowed, ns+"/"+name) {
		return user, ErrForbidden
	}
	return user, nil
}

// AnyOf tries authenticators in order; the first success wins. A forbidden identity stays forbidden.
type AnyOf []Authenticator

// Authenticate returns the first success, else the most telling failure.
func (a AnyOf) Authenticate(ctx context.Context, token string) (string, error) {
	err := ErrUnauthenticated
	for _, au := range a {
		user, aerr := au.Authenticate(ctx, token)
		if aerr == nil {
			return user, nil
		}
		if errors.Is(aerr, ErrForbidden) || !errors.Is(err, ErrForbidden) {
			err = aerr
		}
	}
	return "", err
}

// StaticToken accepts one fixed token (from a flag or file, for `make dev` and tests).
type StaticToken string

// Authenticate compares in constant time; an empty StaticToken accepts nothing.
func (s StaticToken) Authenticate(_ context.Context, token string) (string, error) {
	if s == "" || subtle.ConstantTimeCompare([]byte(s), []byte(token)) != 1 {
		return "", ErrUnauthenticated
	}
	return "static-token", nil
}
