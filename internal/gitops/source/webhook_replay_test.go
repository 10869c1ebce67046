package source

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestWebhookRefusesReplaysAndOversizedBodies: a signed delivery is acted on once — the same delivery ID, or the
// same signed body under a new ID (the ID is not signed), is acknowledged and ignored; a body over the bound is
// refused with 413 before any signature check.
func TestWebhookRefusesReplaysAndOversizedBodies(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	secret := []byte("s3cret")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: WebhookSecretName},
		Data:       map[string][]byte{WebhookSecretKey: secret}}).Build()
	h := &Handler{Client: c}
	mux := h.Mux()
	deliver := func(id string, body []byte) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/webhook/team", strings.NewReader(string(body)))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		out := map[string]any{}
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	body := []byte(samplePush)
	code, out := deliver("d-1", body)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(out["reason"]).To(Equal("no source target matches"), "the first delivery is handled")
	code, out = deliver("d-1", body)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(out["reason"]).To(ContainSubstring("already received"), "the same delivery again")
	code, out = deliver("d-2", body)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(out["reason"]).To(ContainSubstring("already received"), "the same signed body under a new delivery ID")

	big := make([]byte, maxBody+1)
	code, _ = deliver("d-3", big)
	g.Expect(code).To(Equal(http.StatusRequestEntityTooLarge))
}
