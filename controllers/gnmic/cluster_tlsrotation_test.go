package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// addCoreTarget adds a Target the test Pipelines select, which changes the plan and so makes the operator push.
func addCoreTarget(g Gomega, ns, name string) {
	tg := target(ns, name, "192.0.2.200:57400", "default")
	tg.Labels = map[string]string{"role": "core"}
	g.Expect(env.Client.Create(context.Background(), tg)).To(Succeed())
}

func applied(g Gomega, ns, name string) *metav1.Condition {
	cond := meta.FindStatusCondition(getCluster(g, ns, name).Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)
	g.Expect(cond).NotTo(BeNil())
	return cond
}

// A rotated CA (here: its Secret deleted, so the operator issues a new CA and serving certificate) does not break
// the pushes while the collectors still serve their old certificate: the operator trusts the old CA for a
// collector until that collector serves a certificate of the new one, and then only the new CA — all without a
// manager restart. (Before, the client trusted only the new CA at once, and pushes to every collector not yet
// restarted failed with "x509: certificate signed by unknown authority".)
func TestClusterAPITLSCARotationKeepsPushing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fleet(g, ns, 1)
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "rot"))).To(Succeed())
	c := &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rot"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0", Replicas: ptrInt32(1),
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{}}},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	var oldServing certs.Pair
	g.Eventually(func(g Gomega) { oldServing, _ = secretPair(g, ns, "gnmic-rot-api-tls") }).Should(Succeed())
	oldCA, _ := secretPair(g, ns, "gnmic-rot-api-ca")
	srv, err := gnmicserver.StartTLS("127.0.0.1:0", oldServing.CertPEM, oldServing.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "rot", 0, []*gnmicserver.Server{srv}))).To(Succeed())
	touch(g, ns, "rot", "1")
	g.Eventually(srv.TargetNames).Should(ContainElement(ns + "/r000"))

	// Rotate the CA. The collector keeps serving its old certificate (its pod has not restarted yet).
	_, caSecret := secretPair(g, ns, "gnmic-rot-api-ca")
	g.Expect(env.Client.Delete(ctx, caSecret)).To(Succeed())
	touch(g, ns, "rot", "2")
	var newServing certs.Pair
	g.Eventually(func(g Gomega) {
		newCA, _ := secretPair(g, ns, "gnmic-rot-api-ca")
		g.Expect(newCA.CertPEM).NotTo(Equal(oldCA.CertPEM))
		var s *corev1.Secret
		newServing, s = secretPair(g, ns, "gnmic-rot-api-tls")
		g.Expect(s.Data["ca.crt"]).To(Equal(newCA.CertPEM))
	}).Should(Succeed())
	addCoreTarget(g, ns, "r001")
	g.Eventually(srv.TargetNames).Should(ContainElement(ns+"/r001"), "pushed while the collector serves the old CA's certificate")
	g.Eventually(func(g Gomega) { g.Expect(applied(g, ns, "rot").Status).To(Equal(metav1.ConditionTrue)) }).Should(Succeed())

	// The pod restarts with the new certificate: pushes go on.
	g.Expect(srv.Restart(newServing.CertPEM, newServing.KeyPEM, nil)).To(Succeed())
	addCoreTarget(g, ns, "r002")
	g.Eventually(srv.TargetNames).Should(ContainElement(ns + "/r002"))

	// From then on the old CA is no longer trusted for it.
	g.Expect(srv.Restart(oldServing.CertPEM, oldServing.KeyPEM, nil)).To(Succeed())
	addCoreTarget(g, ns, "r003")
	g.Eventually(func(g Gomega) {
		cond := applied(g, ns, "rot")
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonConfigurationFailed))
		g.Expect(cond.Message).To(ContainSubstring("certificate"))
	}).Should(Succeed())
	g.Expect(srv.TargetNames()).NotTo(ContainElement(ns + "/r003"))
}
