package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// apiServerFrom asks the netprobe pod `from` to GET path from the API server with its service-account credentials
// (host empty: KUBERNETES_SERVICE_HOST and _PORT, as an in-cluster client does).
func apiServerFrom(from *corev1.Pod, host, path string) (int, string, error) {
	q := url.Values{"path": {path}}
	if host != "" {
		q.Set("host", host)
	}
	return get(fmt.Sprintf("http://%s:8080/apiserver?%s", from.Status.PodIP, q.Encode()))
}

// podReaderServiceAccount makes a ServiceAccount in ns with a Role that lists the namespace's pods, and returns
// the RoleBinding that grants it (deleting it takes the permission away).
func podReaderServiceAccount(t *testing.T, ns, name string) *rbacv1.RoleBinding {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	})).To(Succeed())
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-reads-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	return binding
}

// inClusterProbePod is netprobe running as serviceAccount with its token mounted.
func inClusterProbePod(ns, name, serviceAccount string) *corev1.Pod {
	pod := probePod(ns, name, map[string]string{"app": name})
	pod.Spec.ServiceAccountName = serviceAccount
	pod.Spec.AutomountServiceAccountToken = ptr.To(true)
	return pod
}

// TestPodReachesTheAPIServerWithInClusterCredentials checks what an operator pod needs from its node: the
// `kubernetes` Service (KUBERNETES_SERVICE_HOST) leads to the API server, whose certificate the token volume's
// ca.crt verifies, and the API server authenticates the pod's token and authorizes it by its RBAC.
func TestPodReachesTheAPIServerWithInClusterCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "realnode-apiserver")
	binding := podReaderServiceAccount(t, ns, "reader")
	pod := runPod(t, inClusterProbePod(ns, "in-cluster", "reader"))
	listPods := "/api/v1/namespaces/" + ns + "/pods"

	g.Eventually(func(g Gomega) {
		status, body, err := apiServerFrom(pod, "", listPods)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`"kind":"PodList"`))
		g.Expect(body).To(ContainSubstring(`"name":"in-cluster"`))
	}).Should(Succeed(), "the pod lists its namespace's pods through the kubernetes Service")

	g.Expect(env.Client.Delete(context.Background(), binding)).To(Succeed())
	g.Eventually(func(g Gomega) {
		status, body, err := apiServerFrom(pod, "", listPods)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusForbidden), body)
		g.Expect(body).To(ContainSubstring(`system:serviceaccount:` + ns + `:reader`))
	}).Should(Succeed(), "without the RoleBinding the same token is refused")
}

// TestRootCAPublishedToPodsVerifiesTheAPIServerByEveryInClusterName checks, from the node, that the root CA the
// controller-manager publishes to every namespace (kube-root-ca.crt, the token volume's ca.crt) verifies the
// certificate the API server presents at the node's address for each name a pod may use.
func TestRootCAPublishedToPodsVerifiesTheAPIServerByEveryInClusterName(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "realnode-rootca")
	var rootCA corev1.ConfigMap
	g.Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &rootCA)
	}).Should(Succeed())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM([]byte(rootCA.Data["ca.crt"]))).To(BeTrue())
	u, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	atNode := net.JoinHostPort(realnode.GatewayIP, u.Port())
	var failures []string
	for _, name := range append([]string{testenv.KubernetesServiceIP(), realnode.GatewayIP}, testenv.InClusterAPIServerNames...) {
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
			Config: &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12}}
		conn, err := dialer.DialContext(context.Background(), "tcp", atNode)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		g.Expect(conn.Close()).To(Succeed())
	}
	g.Expect(failures).To(BeEmpty(), "the API server at %s, verified with kube-root-ca.crt", atNode)
}
