package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// namespace makes a namespace (Pod Security "restricted", the cluster's default) deleted after the test.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-",
		Labels: map[string]string{testenv.PodSecurityEnforceLabel: "restricted"}}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// probePod is netprobe on the real node, as locked down as the restricted level asks and more: non-root, read-only
// root filesystem, no capabilities, RuntimeDefault seccomp, the image imported offline (never pulled).
func probePod(ns, name string, labels map[string]string) *corev1.Pod {
	return devstack.NetprobePod(ns, name, labels)
}

// runPod creates the pod and waits until it is Ready on the real node; it returns the pod as the API server has it.
func runPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	// Admission refuses pods until the controller-manager has made the namespace's default ServiceAccount.
	g.Eventually(func() error { return env.Client.Create(context.Background(), pod.DeepCopy()) }).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Spec.NodeName).To(Equal(node.Name))
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", pod.Status)
	}).Should(Succeed())
	return pod
}

// get fetches a URL from the test process (that is, from the node itself).
func get(target string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// fetchFrom asks the netprobe pod `from` to GET target: the request then starts inside that pod, where
// NetworkPolicies apply.
func fetchFrom(from *corev1.Pod, target string) (int, string, error) {
	return get(fmt.Sprintf("http://%s:8080/fetch?url=%s", from.Status.PodIP, url.QueryEscape(target)))
}

func TestRealNodeIsReadyTaintedAndBesideTheSimulatedOnes(t *testing.T) {
	g := NewWithT(t)
	var n corev1.Node
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &n)).To(Succeed())
	g.Expect(n.Spec.Taints).To(ContainElement(And(HaveField("Key", realnode.Taint), HaveField("Effect", corev1.TaintEffectNoSchedule))))
	g.Expect(n.Labels).To(HaveKeyWithValue(realnode.NodeLabel, "true"))
	g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: realnode.GatewayIP}))
	g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v" + testenv.KubernetesVersion))
	g.Expect(n.Status.NodeInfo.ContainerRuntimeVersion).To(HavePrefix("containerd://2.4.2"))
	var nodes corev1.NodeList
	g.Expect(env.Client.List(context.Background(), &nodes)).To(Succeed())
	g.Expect(nodes.Items).To(ContainElement(HaveField("ObjectMeta.Annotations", HaveKeyWithValue(testenv.SimulatedNodeAnnotation, "fake"))),
		"the kwok nodes stay beside the real one")
}

func TestPodFromOfflineImageRunsAsNonRootWithReadOnlyRoot(t *testing.T) {
	g := NewWithT(t)
	pod := runPod(t, probePod(namespace(t, "realnode-pod"), "probe", map[string]string{"app": "probe"}))
	status, body, err := get("http://" + pod.Status.PodIP + ":8080/whoami")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	var id struct {
		UID, GID     int
		RootWritable bool
		WriteError   string
	}
	g.Expect(json.Unmarshal([]byte(body), &id)).To(Succeed())
	g.Expect(id.UID).To(Equal(65532), "the image's USER")
	g.Expect(id.GID).To(Equal(65532))
	g.Expect(id.RootWritable).To(BeFalse())
	g.Expect(id.WriteError).To(ContainSubstring("read-only file system"))
}

func TestClusterIPServiceRoutesToThePod(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "realnode-svc")
	runPod(t, probePod(ns, "backend", map[string]string{"app": "backend"}))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "backend"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	g.Expect(env.Client.Create(context.Background(), svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
	// The controller-manager's EndpointSlice controller feeds kube-proxy, which writes the nftables rules.
	g.Eventually(func() (string, error) {
		_, body, err := get("http://" + svc.Spec.ClusterIP + "/whoami")
		return body, err
	}).Should(ContainSubstring(`"Hostname":"backend"`))
}

func TestNetworkPolicyIsEnforcedBetweenRealPods(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "realnode-np")
	server := runPod(t, probePod(ns, "server", map[string]string{"app": "server"}))
	clientPod := runPod(t, probePod(ns, "client", map[string]string{"role": "client"}))
	target := "http://" + server.Status.PodIP + ":8080/whoami"
	reachable := func() error {
		status, body, err := fetchFrom(clientPod, target)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("client could not reach the server: %d %s", status, body)
		}
		return nil
	}

	g.Eventually(reachable).Should(Succeed(), "without a policy the client reaches the server")

	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	g.Expect(env.Client.Create(context.Background(), deny)).To(Succeed())
	g.Eventually(reachable).Should(HaveOccurred(), "a deny-all ingress policy blocks the client")
	g.Consistently(reachable, 3*time.Second, time.Second).Should(HaveOccurred())

	named := intstr.FromString("http")
	allow := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-clients"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
			}},
		},
	}
	g.Expect(env.Client.Create(context.Background(), allow)).To(Succeed())
	g.Eventually(reachable).Should(Succeed(), "allowed by label on the named port")

	patch := client.MergeFrom(clientPod.DeepCopy())
	clientPod.Labels["role"] = "stranger"
	g.Expect(env.Client.Patch(context.Background(), clientPod, patch)).To(Succeed())
	g.Eventually(reachable).Should(HaveOccurred(), "relabelled, the client is blocked again")
}
