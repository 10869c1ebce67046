package olm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// refreshService is the Service the bundle ships in front of the TargetSource refresh API (docs/targetsource.md).
const refreshService = "quartet-operator-targetsource-refresh"

// refreshThroughItsService checks the refresh API as shipped: the bundle's Service leads to the port the CSV's
// Deployment starts the API on, and a signed refresh sent to that Service — through the API server's service
// proxy, as an in-cluster inventory would reach it — is answered 202 by the manager running as installed, which
// records the request on the TargetSource.
func refreshThroughItsService(t *testing.T, m *asinstalled.Manager) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	const ns, key = "default", "k3y"
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refresh-hook"},
		StringData: map[string]string{"hmac": key}})).To(Succeed())
	ts := &gnmicv1alpha1.TargetSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refreshed-inventory"},
		Spec: gnmicv1alpha1.TargetSourceSpec{
			Source: gnmicv1alpha1.InventorySource{Type: "Static", Static: &gnmicv1alpha1.StaticSource{
				Devices: []gnmicv1alpha1.StaticDevice{{Name: "refresh-r1", Address: "192.0.2.10"}}}},
			Target: gnmicv1alpha1.TargetTemplate{Profile: "default"},
			Webhook: &gnmicv1alpha1.RefreshWebhook{Enabled: true, Auth: &gnmicv1alpha1.RefreshAuth{
				Signature: &gnmicv1alpha1.SignatureAuth{SecretRef: gnmicv1alpha1.SecretKeyRef{Name: "refresh-hook", Key: "hmac"}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())

	port, err := m.RouteRefreshService(ctx, refreshService)
	g.Expect(err).NotTo(HaveOccurred())
	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	body := []byte(`{"event":"device.added"}`)
	// Until the manager's cache holds the new TargetSource the API answers 401, like for a missing one. Each
	// attempt is signed with its own timestamp (the HMAC covers "<timestamp>.<body>").
	g.Eventually(func(g Gomega) {
		stamp := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte(stamp + "."))
		mac.Write(body)
		signature := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		var code int
		result := clientset.CoreV1().RESTClient().Post().Namespace(port.Namespace).Resource("services").
			Name(fmt.Sprintf("%s:%d", port.Name, port.Port)).SubResource("proxy").
			Suffix("api/v1/namespaces", ns, "targetsources", ts.Name, "refresh").
			SetHeader("X-Hook-Signature", signature).SetHeader("X-Hook-Timestamp", stamp).Body(body).Do(ctx).StatusCode(&code)
		g.Expect(code).To(Equal(http.StatusAccepted), "through the service proxy: %v", result.Error())
	}).WithTimeout(time.Minute).Should(Succeed())
	got := &gnmicv1alpha1.TargetSource{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKey(gnmicv1alpha1.AnnotationRequestedAt), "the manager recorded the refresh")
}
