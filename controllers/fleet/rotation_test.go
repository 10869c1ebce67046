package fleet_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
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
