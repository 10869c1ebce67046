package fleet_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
)

// rotateToken rotates the token in Fleet and in the credentials Secret at once (the cached client still holds the
// old one), and rotates it back when the test ends.
func rotateToken(t *testing.T, g Gomega, token string) {
	ctx := context.Background()
	secretKey := client.ObjectKey{Namespace: "fleet-system", Name: "fleet-credentials"}
	set := func(password string) {
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, secretKey, secret)).To(Succeed())
		secret.Data[fleetclient.SecretKeyPassword] = []byte(password)
		g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
		srv.SetCredentials("stack-42", password)
	}
	set(token)
	t.Cleanup(func() { set("glc_token") })
}

func TestRotatedTokenUnblocksAPipelineFinalizer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(ns, "teardown", func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = ns + "-teardown" })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	var got = p
	g.Eventually(func(g Gomega) { got = synced(g, key) }).Should(Succeed())

	rotateToken(t, g, "glc_rotated_for_teardown")
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	g.Eventually(gone(key)).Should(BeTrue())
	g.Expect(srv.PipelineByName(ns + "-teardown")).To(BeNil())
	// The first delete met the old token; that 401 alone rebuilt the client, so the very next try succeeded.
	var refused int
	for _, c := range srv.CallsTo("DeletePipeline") {
		if c.Request.(*pipelinev1.DeletePipelineRequest).GetId() == got.Status.ID && c.Code == connect.CodeUnauthenticated {
			refused++
		}
	}
	g.Expect(refused).To(BeNumerically("<=", 1), "DeletePipeline %s answered 401 %d times", got.Status.ID, refused)
}

func TestRotatedTokenUnblocksACollectorFinalizer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	id := ns + "-teardown"
	srv.PutCollector(&collectorv1.Collector{Id: id, Name: "teardown", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY,
		RemoteAttributes: map[string]string{"set-in-ui": "keep"}})
	t.Cleanup(func() { srv.RemoveCollector(id) })
	c := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "teardown"},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"rack": "r7"}}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	key := client.ObjectKeyFromObject(c)
	g.Eventually(func(g Gomega) { collectorReady(g, key) }).Should(Succeed())
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("rack", "r7"))

	// Counted from here: an earlier test's rotation back may have cost this test's setup a 401 of its own.
	rotated := time.Now()
	rotateToken(t, g, "glc_rotated_for_collector_teardown")
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &fleetv1alpha1.Collector{}))
	}).Should(BeTrue(), "the finalizer finished with the rotated token")
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{"set-in-ui": "keep"}), "only its own key removed")
	// The first call of the finalizer met the old token; that 401 alone rebuilt the client.
	var refused int
	for _, call := range srv.Calls() {
		if r, ok := call.Request.(*collectorv1.GetCollectorRequest); ok && r.GetId() == id && call.Code == connect.CodeUnauthenticated &&
			!call.At.Before(rotated) {
			refused++
		}
	}
	g.Expect(refused).To(BeNumerically("<=", 1), "GetCollector %s answered 401 %d times", id, refused)
}
