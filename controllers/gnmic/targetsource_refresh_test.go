package gnmic_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
)

func TestRefreshAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		StringData: map[string]string{"token": "s3cret", "hmac": "k3y"}})).To(Succeed())
	ref := func(key string) gnmicv1alpha1.SecretKeyRef { return gnmicv1alpha1.SecretKeyRef{Name: "hook", Key: key} }

	both := staticSource(ns, "both", dev("r1", "10.0.0.1"))
	both.Spec.Webhook = &gnmicv1alpha1.RefreshWebhook{Enabled: true, Debounce: &metav1.Duration{Duration: 5 * time.Second},
		Auth: &gnmicv1alpha1.RefreshAuth{
			Bearer:    &gnmicv1alpha1.BearerAuth{SecretRef: ref("token")},
			Signature: &gnmicv1alpha1.SignatureAuth{SecretRef: ref("hmac"), Algorithm: "sha512", Header: "X-Hook-Signature"},
		}}
	disabled := staticSource(ns, "disabled", dev("r1", "10.0.0.1"))
	disabled.Spec.Webhook = &gnmicv1alpha1.RefreshWebhook{Enabled: false,
		Auth: &gnmicv1alpha1.RefreshAuth{Bearer: &gnmicv1alpha1.BearerAuth{SecretRef: ref("token")}}}
	for _, ts := range []*gnmicv1alpha1.TargetSource{both, disabled} {
		g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
		waitReason(t, ns, ts.Name, gnmicv1alpha1.ReasonSucceeded)
	}

	// The handler is served exactly as the manager serves it on --api-bind-address, reading through the
	// manager's cached client and the API server.
	api := httptest.NewServer((&gnmic.RefreshServer{Client: env.Manager.GetClient(), Secrets: env.Client, Clock: fakeClock}).Handler())
	t.Cleanup(api.Close)
	// Signed at the server's time: the HMAC covers "<timestamp>.<body>".
	stamp := func() string { return strconv.FormatInt(fakeClock.Now().Unix(), 10) }
	sign := func(body []byte) string { return "sha512=" + hmacHex(sha512.New, "k3y", stamp(), body) }
	post := func(name, bearer, signature string, body []byte) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, api.URL+"/api/v1/namespaces/"+ns+"/targetsources/"+name+"/refresh", bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if signature != "" {
			req.Header.Set("X-Hook-Signature", signature)
			req.Header.Set(gnmic.TimestampHeader, stamp())
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	body := []byte(`{"event":"device.added"}`)

	code, _ := post("missing", "s3cret", sign(body), body)
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = post("disabled", "s3cret", "", body)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a disabled webhook looks like a missing TargetSource")
	code, _ = post("both", "wrong", sign(body), body)
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = post("both", "s3cret", "", body)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "both methods must pass when both are set")
	code, _ = post("both", "s3cret", sign([]byte("other body")), body)
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = post("both", "s3cret", sign(body), bytes.Repeat([]byte("x"), gnmic.MaxRefreshBody+1))
	g.Expect(code).To(Equal(http.StatusRequestEntityTooLarge))

	before := runs(g, ns, "both")
	code, out := post("both", "s3cret", sign(body), body)
	g.Expect(code).To(Equal(http.StatusAccepted))
	g.Expect(out).To(HaveKeyWithValue("debounced", false))
	g.Expect(out["requestedAt"]).To(Equal(fakeClock.Now().UTC().Format(time.RFC3339Nano)))
	g.Expect(getTS(g, ns, "both").Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationRequestedAt, out["requestedAt"]))
	g.Eventually(func(g Gomega) { g.Expect(runs(g, ns, "both")).To(BeNumerically(">", before)) }).Should(Succeed())

	// Within the debounce window: answered, not recorded. Each attempt sends another body, so a retry is not a
	// replay of the one before.
	attempt := 0
	fresh := func() []byte {
		attempt++
		return []byte(`{"event":"device.added","attempt":` + strconv.Itoa(attempt) + `}`)
	}
	fakeClock.Step(2 * time.Second)
	g.Eventually(func(g Gomega) {
		body := fresh()
		code, out := post("both", "s3cret", sign(body), body)
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(out).To(HaveKeyWithValue("debounced", true))
	}).Should(Succeed())
	// After it: recorded again.
	fakeClock.Step(4 * time.Second)
	g.Eventually(func(g Gomega) {
		body := fresh()
		code, _ := post("both", "s3cret", sign(body), body)
		g.Expect(code).To(Equal(http.StatusAccepted))
	}).Should(Succeed())
}

// hmacHex is the hex HMAC of "<stamp>.<body>", as a refresh sender computes it.
func hmacHex(newHash func() hash.Hash, key, stamp string, body []byte) string {
	mac := hmac.New(newHash, []byte(key))
	mac.Write([]byte(stamp + "."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
