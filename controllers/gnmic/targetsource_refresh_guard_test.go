package gnmic_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
)

// countingReader counts the Secret reads the refresh API makes.
type countingReader struct {
	client.Reader
	reads atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.reads.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// refreshCall is one response of the refresh API: code and body as bytes, so two answers compare exactly.
type refreshCall struct {
	code int
	body string
}

// TestRefreshAPITimestampReplayAndEnumeration: a signed request carries a timestamp the HMAC covers; it is
// refused outside the window and, inside it, when it was accepted before; a missing TargetSource and a wrong
// signature get the very same answer; refused calls are limited per client before any Secret is read.
func TestRefreshAPITimestampReplayAndEnumeration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		StringData: map[string]string{"hmac": "k3y"}})).To(Succeed())
	ts := staticSource(ns, "signed", dev("r1", "10.0.0.1"))
	ts.Spec.Suspend = true
	ts.Spec.Webhook = &gnmicv1alpha1.RefreshWebhook{Enabled: true, Debounce: &metav1.Duration{Duration: time.Second},
		Auth: &gnmicv1alpha1.RefreshAuth{Signature: &gnmicv1alpha1.SignatureAuth{
			SecretRef: gnmicv1alpha1.SecretKeyRef{Name: "hook", Key: "hmac"}, Algorithm: "sha256", Header: "X-Hook-Signature"}}}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())

	clock := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	secrets := &countingReader{Reader: env.Client}
	srv := &gnmic.RefreshServer{Client: env.Manager.GetClient(), Secrets: secrets, Clock: clock, RefusalBurst: 4, RefusalRate: 0.5}
	api := httptest.NewServer(srv.Handler())
	t.Cleanup(api.Close)
	post := func(name string, at time.Time, body []byte, key string) refreshCall {
		stamp := strconv.FormatInt(at.Unix(), 10)
		req, err := http.NewRequest(http.MethodPost, api.URL+"/api/v1/namespaces/"+ns+"/targetsources/"+name+"/refresh", bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("X-Hook-Signature", "sha256="+hmacHex(sha256.New, key, stamp, body))
		req.Header.Set(gnmic.TimestampHeader, stamp)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		out, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return refreshCall{resp.StatusCode, string(out)}
	}
	body := []byte(`{"event":"device.added"}`)

	// Until the manager's cache holds the TargetSource it is refused like a missing one; each retry is signed
	// anew (one second later), so it is not a replay.
	var accepted []byte
	g.Eventually(func() int {
		clock.Step(time.Second)
		accepted = []byte(`{"event":"device.added","at":"` + clock.Now().String() + `"}`)
		return post("signed", clock.Now(), accepted, "k3y").code
	}).Should(Equal(http.StatusAccepted))
	acceptedAt := clock.Now()

	// The same request again, within the window and past the debounce: a replay, refused.
	clock.Step(2 * time.Second)
	replay := post("signed", acceptedAt, accepted, "k3y")
	g.Expect(replay.code).To(Equal(http.StatusUnauthorized), "a replayed signed request is refused: %s", replay.body)
	// A fresh signature of the same body is accepted (202, or 200 when the cache still holds the last request).
	g.Expect(post("signed", clock.Now(), accepted, "k3y").code).To(BeElementOf(http.StatusAccepted, http.StatusOK))

	// A timestamp outside the window, either way, is refused even with a correct signature: the clocks need only
	// agree within DefaultSignatureWindow.
	clock.Step(2 * time.Second)
	g.Expect(post("signed", clock.Now().Add(-gnmic.DefaultSignatureWindow-time.Second), body, "k3y").code).To(Equal(http.StatusUnauthorized))
	clock.Step(2 * time.Second)
	g.Expect(post("signed", clock.Now().Add(gnmic.DefaultSignatureWindow+time.Second), body, "k3y").code).To(Equal(http.StatusUnauthorized))
	g.Expect(post("signed", clock.Now().Add(-gnmic.DefaultSignatureWindow+time.Minute), body, "k3y").code).To(BeElementOf(http.StatusAccepted, http.StatusOK),
		"inside the window the sender's clock may lag")

	// A missing TargetSource and a wrong key get the same answer, byte for byte.
	clock.Step(time.Minute) // refill the refusal budget
	missing := post("no-such-source", clock.Now(), body, "k3y")
	wrong := post("signed", clock.Now(), body, "guess")
	g.Expect(missing).To(Equal(wrong), "a caller cannot tell a missing TargetSource from a wrong signature")

	// Refused calls from one client: the burst is answered (each may cost a Secret read), then 429 before
	// anything is read.
	clock.Step(time.Minute)
	readsBefore := secrets.reads.Load()
	var codes []int
	for range 10 {
		codes = append(codes, post("signed", clock.Now(), body, "guess").code)
	}
	g.Expect(codes).To(Equal([]int{401, 401, 401, 401, 429, 429, 429, 429, 429, 429}))
	g.Expect(secrets.reads.Load()-readsBefore).To(BeNumerically("<=", 4), "no Secret read once the client is limited")
	// The limit refills with time (0.5 a second here).
	clock.Step(2 * time.Second)
	g.Expect(post("signed", clock.Now(), body, "k3y").code).To(BeElementOf(http.StatusAccepted, http.StatusOK))
}
