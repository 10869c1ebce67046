package registry

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// countingAuth counts authentications (each would be a Secret read or a TokenReview) and accepts only testToken.
type countingAuth struct{ calls atomic.Int32 }

func (c *countingAuth) Authenticate(ctx context.Context, token string) (Identity, error) {
	c.calls.Add(1)
	return StaticToken(testToken).Authenticate(ctx, token)
}

// Failed write authentications are rate-limited per client address: once a client has used up its burst of
// failures, its writes are answered 429 with Retry-After before any authentication is attempted (no Secret read,
// no TokenReview), valid tokens included, until its bucket refills; other clients are unaffected, and successes
// cost nothing.
func TestFailedAuthenticationIsRateLimited(t *testing.T) {
	g := NewWithT(t)
	r, clk, _ := newTestRegistry()
	auth := &countingAuth{}
	h := Handler(r, auth)
	post := func(from, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/agents", strings.NewReader(postBody("x")))
		req.RemoteAddr = from + ":40000"
		req.TLS = &tls.ConnectionState{}
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for range 2 * AuthFailureBurst {
		g.Expect(post("10.0.0.1", testToken).Code).To(BeElementOf(http.StatusCreated, http.StatusOK), "successes are not limited")
	}
	calls := auth.calls.Load()
	for i := range AuthFailureBurst {
		g.Expect(post("10.0.0.1", "wrong").Code).To(Equal(http.StatusUnauthorized), "failure %d", i+1)
	}
	g.Expect(auth.calls.Load()).To(Equal(calls + AuthFailureBurst))
	rec := post("10.0.0.1", "wrong")
	g.Expect(rec.Code).To(Equal(http.StatusTooManyRequests))
	g.Expect(rec.Header().Get("Retry-After")).NotTo(BeEmpty())
	g.Expect(rec.Body.String()).To(ContainSubstring("too many failed authentications"))
	g.Expect(post("10.0.0.1", testToken).Code).To(Equal(http.StatusTooManyRequests), "a limited client waits, valid token or not")
	g.Expect(auth.calls.Load()).To(Equal(calls+AuthFailureBurst), "a limited request authenticates nothing")
	g.Expect(post("10.0.0.2", testToken).Code).To(Equal(http.StatusOK), "another client is unaffected")

	clk.Step(time.Duration(float64(time.Second) / AuthFailureRate))
	g.Expect(post("10.0.0.1", testToken).Code).To(Equal(http.StatusOK), "the bucket refilled")
}
