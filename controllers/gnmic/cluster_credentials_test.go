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

// secureCluster creates Cluster name with spec.api.tls {} (the operator's per-Cluster CA) and returns its
// replicas stand-in collectors, serving the certificate the operator issued, requiring a client certificate of
// the Cluster's CA (as the collectors' client-auth: require-verify does) and reached through the dial map.
func secureCluster(t *testing.T, g Gomega, ns, name string, replicas int32) []*gnmicserver.Server {
	t.Helper()
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0", Replicas: &replicas,
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{}}}}
	g.Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	var serving certs.Pair
	var secret *corev1.Secret
	g.Eventually(func(g Gomega) { serving, secret = secretPair(g, ns, "gnmic-"+name+"-api-tls") }).Should(Succeed())
	var servers []*gnmicserver.Server
	for range replicas {
		srv, err := gnmicserver.StartMutualTLS("127.0.0.1:0", serving.CertPEM, serving.KeyPEM, secret.Data["ca.crt"])
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = srv.Close() })
		servers = append(servers, srv)
	}
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, name, 0, servers))).To(Succeed())
	touch(g, ns, name, "collectors-started")
	return servers
}

// Plans carry device passwords, which gNMIc's GET /api/v1/config then serves in clear: over a plain-HTTP API
// they are withheld (condition CredentialsWithheld), over the operator-managed TLS API they are pushed.
func TestClusterPushesCredentialsOnlyOverTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := fleet(g, ns, 2)

	plain := collectors(t, 1)
	g.Expect(env.Client.Create(ctx, cluster(g, ns, "plain", 1, plain))).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p-plain", "plain"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		cfg := plain[0].Config().Targets[names[0]]
		g.Expect(cfg).NotTo(BeNil())
		g.Expect(cfg.Username).To(BeNil())
		g.Expect(cfg.Password).To(BeNil())
		cond := meta.FindStatusCondition(getCluster(g, ns, "plain").Status.Conditions, gnmicv1alpha1.ClusterConditionCredentialsWithheld)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonPlaintextAPI))
		g.Expect(cond.Message).To(ContainSubstring("spec.api.plainHTTP"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, ns, "plain")).To(ContainElement(gnmicv1alpha1.ReasonPlaintextAPI))
	}).Should(Succeed())

	secure := secureCluster(t, g, ns, "secure", 1)
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p-secure", "secure"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		cfg := secure[0].Config().Targets[names[0]]
		g.Expect(cfg).NotTo(BeNil())
		g.Expect(cfg.Username).To(HaveValue(Equal("admin")))
		g.Expect(cfg.Password).To(HaveValue(Equal("s3cret")))
		g.Expect(meta.FindStatusCondition(getCluster(g, ns, "secure").Status.Conditions,
			gnmicv1alpha1.ClusterConditionCredentialsWithheld)).To(BeNil())
	}).Should(Succeed())
}
