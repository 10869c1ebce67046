package gnmic_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

// grpcTunnel.tls: {} and clientTLS: {} are issued from the per-Cluster CA: a serving certificate for the tunnel
// Service's names, given to gNMIc's tunnel-server.tls, and a client certificate the collectors present to every
// TLS device whose profile has none of its own (gNMIc's tls-cert/tls-key in the pushed target). Both are mounted
// and roll the pods when renewed. With an issuerRef the same certificate is a cert-manager Certificate. (Before,
// these settings were only validated: CertificatesReady=False TLSNotConfigured, nothing issued.)
func TestClusterTunnelAndClientTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fleet(g, ns, 1)
	// A patch, since the profile controller writes the status meanwhile.
	prof := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	g.Expect(env.Client.Patch(ctx, prof, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tls":{"serverName":"r.lab"}}}`)))).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "tun"))).To(Succeed())
	srv := collectors(t, 1)
	c := cluster(g, ns, "tun", 1, srv)
	c.Spec.Image = "ghcr.io/openconfig/gnmic:0.47.0"
	c.Spec.GRPCTunnel = &gnmicv1alpha1.GRPCTunnel{Port: 57401, TLS: &gnmicv1alpha1.ClusterTLS{}}
	c.Spec.ClientTLS = &gnmicv1alpha1.ClusterTLS{}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	g.Eventually(func(g Gomega) {
		cfg := srv[0].Config().Targets[ns+"/r000"]
		g.Expect(cfg).NotTo(BeNil())
		g.Expect(cfg.TLSCert).To(HaveValue(Equal("/etc/gnmic/client-tls/tls.crt")))
		g.Expect(cfg.TLSKey).To(HaveValue(Equal("/etc/gnmic/client-tls/tls.key")))
	}).Should(Succeed())
	g.Expect(srv[0].Unused()).To(BeEmpty())

	// The tunnel is not published outside the cluster unless the Cluster asks (service.type LoadBalancer).
	tunnelSvc := &corev1.Service{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tun-tunnel"}, tunnelSvc)).To(Succeed())
	g.Expect(tunnelSvc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))

	ca, _ := secretPair(g, ns, "gnmic-tun-api-ca")
	tunnel, s := secretPair(g, ns, "gnmic-tun-tunnel-tls")
	g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(s.Data["ca.crt"]).To(Equal(ca.CertPEM))
	tunnelNames := []string{"gnmic-tun-tunnel." + ns + ".svc", "gnmic-tun-tunnel." + ns + ".svc.cluster.local"}
	g.Expect(certs.LeafValid(ca, tunnel, tunnelNames, x509.ExtKeyUsageServerAuth, time.Now())).To(BeTrue())
	clientCert, _ := secretPair(g, ns, "gnmic-tun-client-tls")
	podNames := []string{"*.gnmic-tun." + ns + ".svc", "*.gnmic-tun." + ns + ".svc.cluster.local"}
	g.Expect(certs.LeafValid(ca, clientCert, podNames, x509.ExtKeyUsageClientAuth, time.Now())).To(BeTrue())

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tun-config"}, cm)).To(Succeed())
	g.Expect(cm.Data["config.yaml"]).To(And(ContainSubstring("cert-file: /etc/gnmic/tunnel-tls/tls.crt"),
		ContainSubstring("key-file: /etc/gnmic/tunnel-tls/tls.key")))
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tun"}, sts)).To(Succeed())
	pod := sts.Spec.Template
	g.Expect(pod.Spec.Volumes).To(ContainElements(HaveField("Secret.SecretName", "gnmic-tun-tunnel-tls"),
		HaveField("Secret.SecretName", "gnmic-tun-client-tls")))
	g.Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElements(HaveField("MountPath", "/etc/gnmic/tunnel-tls"),
		HaveField("MountPath", "/etc/gnmic/client-tls")))
	// The tunnel server reads its certificate at start: a renewal rolls the pods (one at a time). gNMIc reads the
	// client certificate on every dial to a device (TargetConfig.NewTLSConfig): a renewal rolls nothing.
	g.Expect(pod.Annotations).To(And(HaveKeyWithValue("operator.gnmic.dev/tunnel-cert", certs.Fingerprint(tunnel.CertPEM)),
		Not(HaveKey("operator.gnmic.dev/client-cert"))))
	g.Expect(pod.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme).NotTo(Equal(corev1.URISchemeHTTPS), "the REST API stays plain")
	g.Eventually(func(g Gomega) {
		cond := certificatesCondition(g, ns, "tun")
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Message).To(And(ContainSubstring("gRPC tunnel server certificate from the Cluster's CA"),
			ContainSubstring("client certificate from the Cluster's CA")))
	}).Should(Succeed())

	// With an issuerRef, cert-manager issues the client certificate instead.
	g.Expect(env.Client.Patch(ctx, &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tun"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"clientTLS":{"issuerRef":{"name":"ca-issuer"}}}}`)))).To(Succeed())
	var cert *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		cert = getCertificate(g, ns, "gnmic-tun-client-cert")
		g.Expect(certificatesCondition(g, ns, "tun").Reason).To(Equal(gnmicv1alpha1.ReasonCertificatePending))
	}).Should(Succeed())
	g.Expect(cert.Object["spec"]).To(And(HaveKeyWithValue("secretName", "gnmic-tun-client-cert-tls"),
		HaveKeyWithValue("usages", ConsistOf("client auth", "digital signature"))))
	issueAsCertManager(g, cert, ca)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tun"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "gnmic-tun-client-cert-tls")))
		g.Expect(sts.Spec.Template.Annotations).NotTo(HaveKey("operator.gnmic.dev/client-cert"))
		g.Expect(certificatesCondition(g, ns, "tun").Message).To(ContainSubstring("client certificate from cert-manager (Issuer ca-issuer)"))
	}).Should(Succeed())
}

// With spec.grpcTunnel.clientCARef the tunnel server requires and verifies a device client certificate of that CA
// (gNMIc tunnel-server.tls client-auth require-verify): a peer without one cannot register and receive a target
// built from the profile. The CA key is mounted as ca.crt.
func TestClusterTunnelRequiresDeviceClientCertificates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "device-ca"},
		StringData: map[string]string{"bundle.pem": "-----BEGIN CERTIFICATE-----\n"}})).To(Succeed())
	c := cluster(g, ns, "tunca", 1, collectors(t, 1))
	c.Spec.Image = "ghcr.io/openconfig/gnmic:0.47.0"
	c.Spec.GRPCTunnel = &gnmicv1alpha1.GRPCTunnel{Port: 57401, TLS: &gnmicv1alpha1.ClusterTLS{},
		ClientCARef: &gnmicv1alpha1.KeyReference{Name: "device-ca", Key: "bundle.pem"}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tunca-config"}, cm)).To(Succeed())
		g.Expect(cm.Data["config.yaml"]).To(And(ContainSubstring("ca-file: /etc/gnmic/tunnel-client-ca/ca.crt"),
			ContainSubstring("client-auth: require-verify")))
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tunca"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Secret.SecretName", "device-ca"),
			HaveField("Secret.Items", ConsistOf(corev1.KeyToPath{Key: "bundle.pem", Path: "ca.crt"})))))
		g.Expect(sts.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/gnmic/tunnel-client-ca")))
	}).Should(Succeed())

	// Without TLS there is no client certificate to verify: refused, naming the field.
	bad := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain-tunnel"}, Spec: gnmicv1alpha1.ClusterSpec{
		Image:      "ghcr.io/openconfig/gnmic:0.47.0",
		GRPCTunnel: &gnmicv1alpha1.GRPCTunnel{Port: 57401, ClientCARef: &gnmicv1alpha1.KeyReference{Name: "device-ca"}}}}
	err := env.Client.Create(ctx, bad)
	g.Expect(err).To(MatchError(ContainSubstring("spec.grpcTunnel.tls")))
}
