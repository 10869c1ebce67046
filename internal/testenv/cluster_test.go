package testenv_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{Cluster: &testenv.ClusterOptions{ExtraStages: []byte(crashLoopStage)}}))
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-",
		Labels: map[string]string{testenv.PodSecurityEnforceLabel: "restricted"}}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// restrictedPod is a pod template the restricted Pod Security level admits.
func restrictedPod(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "app", Image: "example.org/app:1",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}

func TestDeploymentBecomesAvailableAndIsGarbageCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: restrictedPod(labels)},
	}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(Equal(int32(3)))
	}).WithTimeout(time.Minute).Should(Succeed())
	var pods corev1.PodList
	g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(3))
	for _, p := range pods.Items {
		g.Expect(p.Spec.NodeName).To(HavePrefix("kwok-node-"), "the scheduler placed the pod")
		g.Expect(p.Status.PodIP).To(HavePrefix("10.244."), "kwok gave the pod an IP from the pod CIDR")
	}

	// Deleting the Deployment in the foreground: the garbage collector removes ReplicaSet and pods first.
	g.Expect(env.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	g.Eventually(func(g Gomega) {
		var rs appsv1.ReplicaSetList
		g.Expect(env.Client.List(ctx, &rs, client.InNamespace(ns))).To(Succeed())
		g.Expect(rs.Items).To(BeEmpty())
		g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(d), d))).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())
}

func TestPodSecurityRejectsAPrivilegedPod(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	tpl := restrictedPod(nil)
	tpl.Spec.SecurityContext = nil
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root"}, Spec: tpl.Spec}
	err := env.Client.Create(context.Background(), pod, client.DryRunAll)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))
	// The default namespace enforces restricted too.
	pod.Namespace = "default"
	g.Expect(env.Client.Create(context.Background(), pod, client.DryRunAll)).NotTo(Succeed())
}

func TestGPUPodsSchedule(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	tpl := restrictedPod(nil)
	tpl.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resourceQuantity("2")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"}, Spec: tpl.Spec}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).WithTimeout(time.Minute).Should(Succeed())
}

func TestServerReportsItsReleaseVersion(t *testing.T) {
	g := NewWithT(t)
	kubeconfig, err := env.AddAdminKubeconfig("version-check")
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	assets, err := testenv.BinaryAssetsDir()
	g.Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", path, "version", "-o", "json").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	type info struct {
		GitVersion string `json:"gitVersion"`
	}
	var v struct {
		Client info `json:"clientVersion"`
		Server info `json:"serverVersion"`
	}
	g.Expect(json.Unmarshal(out, &v)).To(Succeed(), string(out))
	g.Expect(v.Server.GitVersion).To(Equal("v" + testenv.KubernetesVersion))
	g.Expect(v.Client.GitVersion).To(Equal("v" + testenv.KubernetesVersion))
}

// A webhook configured with a Service reference — as OLM configures them — reaches a local server through the
// service router, although no pod behind the Service runs anything.
func TestAPIServerReachesAServiceThroughTheRouter(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guard"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
	caPEM, serving := servingCert(t, "guard."+ns+".svc")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serving}})
	g.Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(denyAll), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "guard-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "guard.example.org",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: caPEM,
				Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "guard", Port: ptr.To[int32](443)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		}},
	}
	g.Expect(env.Client.Create(ctx, hook)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, hook) })
	cm := func() error {
		return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "cm-"}})
	}
	// Without a route the API server cannot reach the Service, and says which.
	g.Eventually(cm).Should(MatchError(ContainSubstring("guard." + ns + ".svc:443")))
	route := testenv.ServicePort{Namespace: ns, Name: "guard", Port: 443}
	env.Cluster.Router.Route(route, ln.Addr().String())
	t.Cleanup(func() { env.Cluster.Router.Unroute(route) })
	g.Eventually(cm).Should(MatchError(ContainSubstring("denied by the local guard")))
}

func denyAll(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
		Result: &metav1.Status{Message: "denied by the local guard"}}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func servingCert(t *testing.T, dnsName string) ([]byte, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, _ := x509.MarshalECPrivateKey(key)
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, pair
}

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// An image from a registry under .invalid cannot be pulled, as on a real kubelet: the pod stays Pending with its
// container waiting in ErrImagePull, and a Deployment of it never becomes available.
func TestUnpullableImageWaitsInErrImagePull(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	tpl := restrictedPod(nil)
	tpl.Spec.Containers[0].Image = "registry.invalid/app:typo"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typo"}, Spec: tpl.Spec}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(pod.Status.ContainerStatuses[0].State.Waiting).NotTo(BeNil())
		g.Expect(pod.Status.ContainerStatuses[0].State.Waiting.Reason).To(Equal("ErrImagePull"))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}
