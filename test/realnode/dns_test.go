package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// resolveFrom asks the netprobe pod `from` to resolve name with its own resolv.conf (the kubelet's clusterDNS and
// search path); it returns the addresses sorted, or the resolver's error.
func resolveFrom(from *corev1.Pod, name string) ([]string, error) {
	status, body, err := get(fmt.Sprintf("http://%s:8080/resolve?name=%s", from.Status.PodIP, url.QueryEscape(name)))
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("resolving %s in the pod: %d %s", name, status, body)
	}
	var addrs []string
	if err := json.Unmarshal([]byte(body), &addrs); err != nil {
		return nil, err
	}
	slices.Sort(addrs)
	return addrs, nil
}

// rcodeAt sends one A query for name straight to the node's resolver (UDP, from the node) and returns the
// response code and how many answers came back.
func rcodeAt(name string) (dnsmessage.RCode, int, error) {
	query, err := (&dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 4242, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}).Pack()
	if err != nil {
		return 0, 0, err
	}
	conn, err := net.Dial("udp", net.JoinHostPort(realnode.GatewayIP, "53"))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return 0, 0, err
	}
	if _, err := conn.Write(query); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 4096)
	size, err := conn.Read(buf)
	if err != nil {
		return 0, 0, err
	}
	var answer dnsmessage.Message
	if err := answer.Unpack(buf[:size]); err != nil {
		return 0, 0, err
	}
	return answer.RCode, len(answer.Answers), nil
}

// TestPodsResolveServicesAndPodsByClusterDNS checks the names pods use: the API server's, a ClusterIP Service's
// (short and fully qualified), and a pod's own record under its headless Service (<hostname>.<service>.<ns>.svc),
// which a pod also reaches by that name.
func TestPodsResolveServicesAndPodsByClusterDNS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "realnode-dns")
	backend := probePod(ns, "backend", map[string]string{"app": "backend"})
	backend.Spec.Hostname, backend.Spec.Subdomain = "web-0", "web"
	backend = runPod(t, backend)
	clientPod := runPod(t, probePod(ns, "client", map[string]string{"role": "client"}))
	clusterIP := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "backend"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	headless := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "backend"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}}},
	}
	g.Expect(env.Client.Create(ctx, clusterIP)).To(Succeed())
	g.Expect(env.Client.Create(ctx, headless)).To(Succeed())

	g.Eventually(func() ([]string, error) {
		return resolveFrom(clientPod, "kubernetes.default.svc.cluster.local")
	}).Should(Equal([]string{testenv.KubernetesServiceIP()}), "the API server's Service")
	g.Eventually(func() ([]string, error) {
		return resolveFrom(clientPod, "backend."+ns+".svc.cluster.local")
	}).Should(Equal([]string{clusterIP.Spec.ClusterIP}), "a ClusterIP Service, fully qualified")
	g.Eventually(func() ([]string, error) { return resolveFrom(clientPod, "backend") }).
		Should(Equal([]string{clusterIP.Spec.ClusterIP}), "a ClusterIP Service by its short name (the pod's search path)")
	podName := "web-0.web." + ns + ".svc.cluster.local"
	g.Eventually(func() ([]string, error) { return resolveFrom(clientPod, podName) }).
		Should(Equal([]string{backend.Status.PodIP}), "a pod's record under its headless Service")
	g.Eventually(func() ([]string, error) { return resolveFrom(clientPod, "web."+ns+".svc.cluster.local") }).
		Should(Equal([]string{backend.Status.PodIP}), "the headless Service names its ready pods")

	g.Eventually(func() (string, error) {
		_, body, err := fetchFrom(clientPod, "http://"+podName+":8080/whoami")
		return body, err
	}).Should(ContainSubstring(`"Hostname":"web-0"`), "the client reaches the pod by its DNS name")
	g.Eventually(func() (string, error) {
		_, body, err := fetchFrom(clientPod, "http://backend/whoami")
		return body, err
	}).Should(ContainSubstring(`"Hostname":"web-0"`), "and through the ClusterIP Service by name")
}

// TestPodReachesTheAPIServerByItsServiceName is the in-cluster client with the API server's DNS name instead of
// KUBERNETES_SERVICE_HOST: the name resolves, the certificate names it, the token is accepted.
func TestPodReachesTheAPIServerByItsServiceName(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "realnode-apiname")
	podReaderServiceAccount(t, ns, "reader")
	pod := runPod(t, inClusterProbePod(ns, "in-cluster", "reader"))
	g.Eventually(func(g Gomega) {
		status, body, err := apiServerFrom(pod, "kubernetes.default.svc", "/api/v1/namespaces/"+ns+"/pods")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`"kind":"PodList"`))
	}).Should(Succeed())
}

// TestNamesOutsideTheClusterGetNoAnswer checks that the node's resolver answers nothing beyond the cluster: a pod
// cannot resolve a public name, and asked directly the resolver refuses it (it has no upstream to forward to),
// while it answers a cluster name at the same address.
func TestNamesOutsideTheClusterGetNoAnswer(t *testing.T) {
	g := NewWithT(t)
	pod := runPod(t, probePod(namespace(t, "realnode-nodns"), "probe", map[string]string{"app": "probe"}))

	for _, name := range []string{"example.com", "kubernetes.io."} {
		addrs, err := resolveFrom(pod, name)
		g.Expect(err).To(HaveOccurred(), "%s resolved in the pod to %v", name, addrs)
	}

	rcode, answers, err := rcodeAt("kubernetes.default.svc.cluster.local.")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rcode).To(Equal(dnsmessage.RCodeSuccess))
	g.Expect(answers).To(Equal(1))
	for _, name := range []string{"example.com.", "kubernetes.io."} {
		rcode, answers, err := rcodeAt(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rcode).To(Equal(dnsmessage.RCodeRefused), "%s: the resolver must not look it up elsewhere", name)
		g.Expect(answers).To(BeZero())
	}
}
