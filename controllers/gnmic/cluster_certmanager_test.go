package gnmic_test

import (
	"context"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

func certManagerObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("cert-manager.io/v1")
	u.SetKind(kind)
	return u
}

// caIssuer creates a cert-manager CA Issuer (its schema is cert-manager's, generated from its Go types).
func caIssuer(g Gomega, ns, name string) {
	u := certManagerObject("Issuer")
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = map[string]any{"ca": map[string]any{"secretName": name + "-root"}}
	g.Expect(env.Client.Create(context.Background(), u)).To(Succeed())
}

func getCertificate(g Gomega, ns, name string) *unstructured.Unstructured {
	u := certManagerObject("Certificate")
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, u)).To(Succeed())
	return u
}

// issueAsCertManager does what cert-manager's controller does for a Certificate signed by a CA issuer: it writes
// the Secret of spec.secretName (type kubernetes.io/tls; tls.crt, tls.key, ca.crt; the labels of
// spec.secretTemplate and cert-manager's annotations) and sets the Certificate Ready.
func issueAsCertManager(g Gomega, cert *unstructured.Unstructured, ca certs.Pair) certs.Pair {
	ctx := context.Background()
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	commonName, _, _ := unstructured.NestedString(cert.Object, "spec", "commonName")
	labels, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "labels")
	issuer, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	usages, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "usages")
	usage := x509.ExtKeyUsageServerAuth
	if slices.Contains(usages, "client auth") {
		usage = x509.ExtKeyUsageClientAuth
	}
	leaf, err := certs.Issue(ca, dnsNames, usage, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cert.GetNamespace(), Name: secretName}}
	_, err = createOrUpdateSecret(ctx, s, func() {
		s.Labels = labels
		s.Annotations = map[string]string{
			"cert-manager.io/certificate-name": cert.GetName(), "cert-manager.io/issuer-name": issuer["name"],
			"cert-manager.io/issuer-kind": issuer["kind"], "cert-manager.io/issuer-group": issuer["group"],
			"cert-manager.io/common-name": commonName, "cert-manager.io/alt-names": strings.Join(dnsNames, ","),
			"cert-manager.io/ip-sans": "", "cert-manager.io/uri-sans": "",
		}
		s.Type = corev1.SecretTypeTLS
		s.Data = map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM, "ca.crt": ca.CertPEM}
	})
	g.Expect(err).NotTo(HaveOccurred())
	setCertificateReady(g, cert, "True", "Ready", "Certificate is up to date and has not expired")
	return leaf
}

func setCertificateReady(g Gomega, cert *unstructured.Unstructured, status, reason, message string) {
	latest := getCertificate(g, cert.GetNamespace(), cert.GetName())
	latest.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status,
		"reason": reason, "message": message, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	g.Expect(env.Client.Status().Update(context.Background(), latest)).To(Succeed())
}

func createOrUpdateSecret(ctx context.Context, s *corev1.Secret, mutate func()) (bool, error) {
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
	if apierrors.IsNotFound(err) {
		mutate()
		return true, env.Client.Create(ctx, s)
	}
	if err != nil {
		return false, err
	}
	mutate()
	return false, env.Client.Update(ctx, s)
}

func certificatesCondition(g Gomega, ns, name string) *metav1.Condition {
	cond := meta.FindStatusCondition(getCluster(g, ns, name).Status.Conditions, gnmicv1alpha1.ClusterConditionCertificatesReady)
	g.Expect(cond).NotTo(BeNil())
	return cond
}

// spec.api.tls.issuerRef: the operator asks cert-manager for the collectors' REST API certificate (a Certificate
// owned by the Cluster, for the pods' DNS names), waits for its Secret with CertificatesReady=False
// CertificatePending (deploying nothing), then mounts the Secret, trusts its ca.crt and pushes over https. A
// renewal by cert-manager (here with a new CA) rolls the pods and keeps the pushes going. (Before, an issuerRef on
// api.tls was refused at admission.)
func TestClusterAPITLSCertManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	caIssuer(g, ns, "ca-issuer")
	fleet(g, ns, 1)
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "cm"))).To(Succeed())
	c := &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0", Replicas: ptrInt32(1),
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{IssuerRef: &gnmicv1alpha1.IssuerReference{Name: "ca-issuer"}}}},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	var cert *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		cert = getCertificate(g, ns, "gnmic-cm-api-cert")
		g.Expect(metav1.IsControlledBy(cert, getCluster(g, ns, "cm"))).To(BeTrue())
		cond := certificatesCondition(g, ns, "cm")
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonCertificatePending))
		g.Expect(cond.Message).To(ContainSubstring("gnmic-cm-api-cert-tls"))
	}).Should(Succeed())
	g.Expect(cert.Object["spec"]).To(And(
		HaveKeyWithValue("secretName", "gnmic-cm-api-cert-tls"),
		HaveKeyWithValue("dnsNames", ConsistOf("*.gnmic-cm."+ns+".svc", "*.gnmic-cm."+ns+".svc.cluster.local")),
		HaveKeyWithValue("issuerRef", map[string]any{"name": "ca-issuer", "kind": "Issuer", "group": "cert-manager.io"}),
		HaveKeyWithValue("usages", ConsistOf("server auth", "digital signature")),
	))
	sts := &appsv1.StatefulSet{}
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-cm"}, sts))).To(BeTrue(),
		"no collector starts before its certificate exists")

	ca, err := certs.NewCA("issuer", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	leaf := issueAsCertManager(g, cert, ca)
	// The operator's own client certificate comes from the same issuer, asked for once the API's is there.
	var operatorCert *unstructured.Unstructured
	g.Eventually(func(g Gomega) { operatorCert = getCertificate(g, ns, "gnmic-cm-operator-client-cert") }).Should(Succeed())
	g.Expect(operatorCert.Object["spec"]).To(HaveKeyWithValue("usages", ConsistOf("client auth", "digital signature")))
	issueAsCertManager(g, operatorCert, ca)
	srv, err := gnmicserver.StartTLS("127.0.0.1:0", leaf.CertPEM, leaf.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "cm", 0, []*gnmicserver.Server{srv}))).To(Succeed())
	touch(g, ns, "cm", "1")
	g.Eventually(srv.TargetNames).Should(ContainElement(ns + "/r000"))
	g.Eventually(func(g Gomega) {
		cond := certificatesCondition(g, ns, "cm")
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Message).To(ContainSubstring("cert-manager (Issuer ca-issuer)"))
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-cm"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "gnmic-cm-api-cert-tls")))
		g.Expect(sts.Spec.Template.Annotations["operator.gnmic.dev/api-cert"]).To(Equal(certs.Fingerprint(leaf.CertPEM)))
	}).Should(Succeed())

	// cert-manager renews, from a new CA: the pods roll, and the collector still serving the old certificate
	// keeps receiving pushes (its CA stays trusted until it serves the new one).
	ca2, err := certs.NewCA("issuer", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	renewed := issueAsCertManager(g, cert, ca2)
	// The operator's client certificate is still from the old CA, which restarted collectors no longer accept:
	// the operator empties its Secret so that cert-manager issues it again, from the new CA.
	g.Eventually(func(g Gomega) {
		_, s := secretPair(g, ns, "gnmic-cm-operator-client-cert-tls")
		g.Expect(s.Data[corev1.TLSCertKey]).To(BeEmpty(), "%v", certificatesCondition(g, ns, "cm"))
	}).Should(Succeed())
	issueAsCertManager(g, operatorCert, ca2)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-cm"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Annotations["operator.gnmic.dev/api-cert"]).To(Equal(certs.Fingerprint(renewed.CertPEM)))
	}).Should(Succeed())
	addCoreTarget(g, ns, "r001")
	g.Eventually(srv.TargetNames).Should(ContainElement(ns + "/r001"))

	// Long after the Certificate's creation its Secret is deleted, and cert-manager re-issues (Ready=False from
	// now): the new wait is CertificatePending, measured from the re-issue, and times out only after a full wait.
	// (Before, the wait was measured from the creation: CertificateTimedOut at once, looked at every minute.)
	g.Eventually(func() time.Duration { return time.Since(cert.GetCreationTimestamp().Time) }).
		WithTimeout(certificateWait + 5*time.Second).Should(BeNumerically(">", certificateWait+time.Second))
	// The issuance request is recorded at creation and not rewritten by later reconciles with the same spec (a
	// rewrite would restart the wait each time and never let it time out).
	g.Expect(cert.GetAnnotations()).To(HaveKey("operator.gnmic.dev/issuance-requested"))
	g.Expect(getCertificate(g, ns, "gnmic-cm-api-cert").GetAnnotations()).To(
		HaveKeyWithValue("operator.gnmic.dev/issuance-requested", cert.GetAnnotations()["operator.gnmic.dev/issuance-requested"]))
	setCertificateReady(g, cert, "False", "DoesNotExist", "Issuing certificate as Secret does not exist")
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gnmic-cm-api-cert-tls"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cond := certificatesCondition(g, ns, "cm")
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonCertificatePending))
		g.Expect(cond.Message).To(ContainSubstring("Secret does not exist"))
	}).Should(Succeed())
}

// A Certificate cert-manager does not issue (here: the issuer does not exist) leaves the Cluster with a clear
// state once the wait is over: CertificateTimedOut with cert-manager's own Ready message, and nothing deployed.
func TestClusterAPITLSCertManagerTimesOut(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	c := &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0",
			API: &gnmicv1alpha1.ClusterAPI{TLS: &gnmicv1alpha1.ClusterTLS{IssuerRef: &gnmicv1alpha1.IssuerReference{Name: "missing", Kind: "ClusterIssuer"}}}},
	}
	g.Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	var cert *unstructured.Unstructured
	g.Eventually(func(g Gomega) { cert = getCertificate(g, ns, "gnmic-stuck-api-cert") }).Should(Succeed())
	setCertificateReady(g, cert, "False", "Pending", `Issuer "missing" not found`)
	g.Eventually(func(g Gomega) {
		cond := certificatesCondition(g, ns, "stuck")
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonCertificateTimedOut))
		g.Expect(cond.Message).To(And(ContainSubstring("gnmic-stuck-api-cert-tls"), ContainSubstring(`Issuer "missing" not found`)))
	}).WithTimeout(certificateWait + time.Minute).Should(Succeed())
	sts := &appsv1.StatefulSet{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gnmic-stuck"}, sts)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}
