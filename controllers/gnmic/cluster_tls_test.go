package gnmic_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// touch changes an annotation of the Cluster, which starts a reconcile (as any spec or annotation change does).
func touch(g Gomega, ns, name, value string) {
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := []byte(`{"metadata":{"annotations":{"test/touched":"` + value + `"}}}`)
	g.Expect(env.Client.Patch(context.Background(), c, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

func secretPair(g Gomega, ns, name string) (certs.Pair, *corev1.Secret) {
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
	return certs.Pair{CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey]}, s
}

// spec.api.tls (admitted without an issuer: the operator manages the certificates) gives the collectors a
// serving certificate from a per-Cluster CA and gNMIc's api-server.tls settings; the operator pushes over https,
// trusting that CA only. A certificate due for renewal is replaced and the pods roll. (Before, spec.api.tls
// needed a cert-manager issuer, issued nothing and switched the operator to https against plain-HTTP collectors.)
func TestClusterAPITLSOperatorManaged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0", Replicas: ptrInt32(1),
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{}}},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	var serving certs.Pair
	g.Eventually(func(g Gomega) {
		var s *corev1.Secret
		serving, s = secretPair(g, ns, "gnmic-secure-api-tls")
		g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
		g.Expect(s.Data).To(HaveKey("ca.crt"))
		g.Expect(metav1.IsControlledBy(s, getCluster(g, ns, "secure"))).To(BeTrue())
	}).Should(Succeed())
	ca, _ := secretPair(g, ns, "gnmic-secure-api-ca")
	names := []string{"*.gnmic-secure." + ns + ".svc", "*.gnmic-secure." + ns + ".svc.cluster.local"}
	g.Expect(certs.ServingValid(ca, serving, names, time.Now())).To(BeTrue())

	// The certificates are written first in the reconcile, the collector configuration and StatefulSet after.
	sts := &appsv1.StatefulSet{}
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-secure-config"}, cm)).To(Succeed())
		g.Expect(cm.Data["config.yaml"]).To(And(ContainSubstring("cert-file: /etc/gnmic/tls/tls.crt"),
			ContainSubstring("key-file: /etc/gnmic/tls/tls.key")))
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-secure"}, sts)).To(Succeed())
		pod := sts.Spec.Template
		// Mutual TLS: the kubelet has no client certificate, so the probe is a TCP check.
		g.Expect(pod.Spec.Containers[0].ReadinessProbe.TCPSocket).NotTo(BeNil())
		g.Expect(pod.Spec.Containers[0].ReadinessProbe.HTTPGet).To(BeNil())
		g.Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "gnmic-secure-api-tls")))
		g.Expect(pod.Annotations["operator.gnmic.dev/api-cert"]).To(Equal(certs.Fingerprint(serving.CertPEM)))
	}).Should(Succeed())

	// A collector serving the issued certificate gets its configuration over https.
	srv, err := gnmicserver.StartTLS("127.0.0.1:0", serving.CertPEM, serving.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "secure", 0, []*gnmicserver.Server{srv}))).To(Succeed())
	touch(g, ns, "secure", "1")
	g.Eventually(srv.ApplyCount).Should(BeNumerically(">", 0))
	g.Eventually(func(g Gomega) {
		got := getCluster(g, ns, "secure")
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.ClusterConditionCertificatesReady)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)).To(BeTrue())
	}).Should(Succeed())

	// Rotation: a serving certificate past two thirds of its life is replaced from the same CA, and the pods
	// roll to read it.
	old, err := certs.IssueServing(ca, names, time.Now().Add(-certs.ServingValidity*3/4))
	g.Expect(err).NotTo(HaveOccurred())
	_, s := secretPair(g, ns, "gnmic-secure-api-tls")
	aged := client.MergeFrom(s.DeepCopy())
	s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = old.CertPEM, old.KeyPEM
	g.Expect(env.Client.Patch(ctx, s, aged)).To(Succeed())
	touch(g, ns, "secure", "2")
	g.Eventually(func(g Gomega) {
		renewed, _ := secretPair(g, ns, "gnmic-secure-api-tls")
		g.Expect(renewed.CertPEM).NotTo(Equal(old.CertPEM))
		g.Expect(renewed.CertPEM).NotTo(Equal(serving.CertPEM))
		g.Expect(certs.ServingValid(ca, renewed, names, time.Now())).To(BeTrue())
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-secure"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Annotations["operator.gnmic.dev/api-cert"]).To(Equal(certs.Fingerprint(renewed.CertPEM)))
	}).Should(Succeed())
	newCA, _ := secretPair(g, ns, "gnmic-secure-api-ca")
	g.Expect(newCA.CertPEM).To(Equal(ca.CertPEM), "a serving renewal keeps the CA the operator trusts")
}

// A collector whose certificate another CA signed is refused: the operator trusts the Cluster's CA alone.
func TestClusterAPITLSRefusesForeignCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	other, err := certs.NewCA("impostor", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	fake, err := certs.IssueServing(other, []string{"*.gnmic-guarded." + ns + ".svc.cluster.local"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := gnmicserver.StartTLS("127.0.0.1:0", fake.CertPEM, fake.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "guarded", 0, []*gnmicserver.Server{srv}))).To(Succeed())
	c := &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0", Replicas: ptrInt32(1),
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{}}},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cond := meta.FindStatusCondition(getCluster(g, ns, "guarded").Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonConfigurationFailed))
		g.Expect(cond.Message).To(ContainSubstring("certificate"))
	}).Should(Succeed())
	g.Expect(srv.ApplyCount()).To(BeZero())
}

// A CA bundle for the REST API is refused at admission with the reason: the operator trusts exactly the CA that
// issued the collectors' certificate.
func TestClusterAPITLSBundleRefused(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0",
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{IssuerRef: &gnmicv1alpha1.IssuerReference{Name: "ca"}, BundleRef: "ca"}}}}
	err := env.Client.Create(context.Background(), c)
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.api.tls.bundleRef"), ContainSubstring("per-Cluster CA"))))
}

func getCluster(g Gomega, ns, name string) *gnmicv1alpha1.Cluster {
	c := &gnmicv1alpha1.Cluster{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c)).To(Succeed())
	return c
}

func ptrInt32(v int32) *int32 { return &v }
