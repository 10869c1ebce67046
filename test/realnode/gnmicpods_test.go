package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/openconfig/gnmic/pkg/api/types"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/testenv/images"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// collectorFleet creates what a Pipeline selects in ns: a credentials Secret, TargetProfile "default", Subscription
// "ifaces", a prometheus Output "prom" and n Targets labelled role=core. It returns the Targets' plan names
// (<namespace>/<name>).
func collectorFleet(g Gomega, ns string, n int) []string {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"username": "admin", "password": "s3cret"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "creds"}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ifaces"},
		Spec: gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/interfaces/interface/state/counters"}, Mode: "STREAM/SAMPLE",
			SampleInterval: &metav1.Duration{Duration: 10 * time.Second}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Output{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom"},
		Spec: gnmicv1alpha1.OutputSpec{Type: gnmicv1alpha1.OutputPrometheus, Config: &apiextensionsv1.JSON{Raw: []byte(`{"listen":":9804"}`)}}})).To(Succeed())
	var names []string
	for i := range n {
		names = append(names, addTarget(g, ns, fmt.Sprintf("r%03d", i)))
	}
	return names
}

// addTarget creates Target name (a documentation address: the stand-in never dials devices) and returns its plan
// name.
func addTarget(g Gomega, ns, name string) string {
	g.Expect(env.Client.Create(context.Background(), &gnmicv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"role": "core"}},
		Spec:       gnmicv1alpha1.TargetSpec{Address: "192.0.2.1:57400", Profile: "default"},
	})).To(Succeed())
	return ns + "/" + name
}

// collectorCluster is a Cluster of the stand-in image on the real node: its pods tolerate the node's taint and
// select it by label. Nothing about the API is set, so the collectors serve mutual TLS, the default.
func collectorCluster(ns, name string, replicas int32) *gnmicv1alpha1.Cluster {
	return &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.ClusterSpec{Image: images.GNMIcStandinRef, Replicas: &replicas,
			PodTemplate: &gnmicv1alpha1.CollectorPodTemplate{
				NodeSelector: map[string]string{realnode.NodeLabel: "true"},
				Tolerations: []corev1.Toleration{{Key: realnode.Taint, Operator: corev1.TolerationOpExists,
					Effect: corev1.TaintEffectNoSchedule}},
			}}}
}

// readyCollectorPod waits until collector pod i of c runs Ready on the real node, as a pod other than notUID, and
// returns it.
func readyCollectorPod(t *testing.T, c *gnmicv1alpha1.Cluster, i int, notUID ktypes.UID) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: c.Namespace, Name: fmt.Sprintf("gnmic-%s-%d", c.Name, i)}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, pod)).To(Succeed())
		g.Expect(pod.UID).NotTo(Equal(notUID), "the deleted pod")
		g.Expect(pod.Spec.NodeName).To(Equal(node.Name), "scheduled on the real node; conditions: %+v", pod.Status.Conditions)
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", pod.Status)
	}).WithTimeout(3*time.Minute).Should(Succeed(), "collector pod %s", key)
	return pod
}

// operatorClient is an HTTPS client presenting the operator's client certificate of Cluster c (Secret
// gnmic-<c>-operator-client-tls) and trusting only the Cluster's CA, as the operator's own client does; without
// withCertificate it presents none. Every request opens a new connection, so a recreated pod is reached afresh.
func operatorClient(g Gomega, c *gnmicv1alpha1.Cluster, withCertificate bool) *http.Client {
	ctx := context.Background()
	api, own := &corev1.Secret{}, &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "gnmic-" + c.Name + "-api-tls"}, api)).To(Succeed())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(api.Data["ca.crt"])).To(BeTrue())
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCertificate {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "gnmic-" + c.Name + "-operator-client-tls"}, own)).To(Succeed())
		cert, err := tls.X509KeyPair(own.Data[corev1.TLSCertKey], own.Data[corev1.TLSPrivateKeyKey])
		g.Expect(err).NotTo(HaveOccurred())
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// collectorTargets reads the targets collector pod i of c holds, through its API at the address the operator
// pushes to (<pod>.<service>.<namespace>.svc.cluster.local, resolved by the cluster DNS).
func collectorTargets(hc *http.Client, c *gnmicv1alpha1.Cluster, i int) (map[string]*types.TargetConfig, error) {
	resp, err := hc.Get("https://" + c.CollectorPodAddress(i, "") + "/api/v1/config/targets")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pod %d: %d %s", i, resp.StatusCode, body)
	}
	targets := map[string]*types.TargetConfig{}
	return targets, json.Unmarshal(body, &targets)
}

// expectPlansDelivered checks that each collector pod holds exactly the targets whose status names it, with their
// credentials, that together they hold want, and that the Cluster says its configuration is applied.
func expectPlansDelivered(g Gomega, hc *http.Client, c *gnmicv1alpha1.Cluster, want []string) {
	targets := &gnmicv1alpha1.TargetList{}
	g.Expect(env.Client.List(context.Background(), targets, client.InNamespace(c.Namespace))).To(Succeed())
	placed := map[string][]string{}
	for _, tg := range targets.Items {
		if st, ok := tg.Status.ClusterStates[c.Name]; ok {
			placed[st.Pod] = append(placed[st.Pod], c.Namespace+"/"+tg.Name)
		}
	}
	var all []string
	for i := range int(c.DesiredReplicas()) {
		held, err := collectorTargets(hc, c, i)
		g.Expect(err).NotTo(HaveOccurred())
		names := slices.Sorted(maps.Keys(held))
		pod := fmt.Sprintf("gnmic-%s-%d", c.Name, i)
		g.Expect(names).To(ConsistOf(placed[pod]), "pod %s holds what the Targets' status places there", pod)
		for _, name := range names {
			g.Expect(held[name].Password).To(HaveValue(Equal("s3cret")), "%s's credentials, over mutual TLS", name)
		}
		all = append(all, names...)
	}
	g.Expect(all).To(ConsistOf(want))
	got := &gnmicv1alpha1.Cluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)).To(BeTrue(),
		"ConfigApplied: %+v", meta.FindStatusCondition(got.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied))
}

// TestGNMIcCollectorPodsGetTheirPlansOverClusterDNS runs a gnmic Cluster as real pods of the collector stand-in
// (./test/gnmicserver/cmd/gnmic-standin, which reads gNMIc's config file and serves its API as the config says)
// on the real node, with the operator's controllers in this process and no dial map: the operator pushes each pod
// its plan at <pod>.gnmic-<cluster>.<namespace>.svc.cluster.local, resolved by the cluster DNS, over the mutual
// TLS a Cluster gets by default. A deleted pod comes back empty and gets its plan again; the Cluster's
// NetworkPolicy gnmic-<cluster>-api refuses the API port to other pods, while the operator keeps pushing.
func TestGNMIcCollectorPodsGetTheirPlansOverClusterDNS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	started := time.Now()
	ns := namespace(t, "realnode-gnmic")
	names := collectorFleet(g, ns, 4)
	c := collectorCluster(ns, "collectors", 2)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "core"},
		Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: c.Name, Enabled: true,
			TargetSelectors:  []metav1.LabelSelector{{MatchLabels: map[string]string{"role": "core"}}},
			SubscriptionRefs: []string{"ifaces"},
			Outputs:          gnmicv1alpha1.PipelineOutputs{OutputRefs: []string{"prom"}},
		}})).To(Succeed())

	pods := []*corev1.Pod{readyCollectorPod(t, c, 0, ""), readyCollectorPod(t, c, 1, "")}
	t.Logf("collector pods Ready on %s after %s", node.Name, time.Since(started).Round(time.Second))

	var hc *http.Client
	g.Eventually(func(g Gomega) {
		hc = operatorClient(g, c, true)
		expectPlansDelivered(g, hc, c, names)
	}).WithTimeout(2*time.Minute).Should(Succeed(), "every Target reaches a collector pod over the cluster DNS")
	t.Logf("every target on a collector pod after %s", time.Since(started).Round(time.Second))

	// The stand-in enforces gNMIc's client-auth require-verify: without the operator's certificate the handshake
	// fails, so what the operator delivered, it delivered over mutual TLS.
	_, err := collectorTargets(operatorClient(g, c, false), c, 0)
	g.Expect(err).To(MatchError(ContainSubstring("certificate required")))

	// A deleted pod is recreated by the StatefulSet controller, empty, and gets its plan again.
	deleted, oldIP := time.Now(), pods[0].Status.PodIP
	g.Expect(env.Client.Delete(ctx, pods[0])).To(Succeed())
	pods[0] = readyCollectorPod(t, c, 0, pods[0].UID)
	g.Eventually(func(g Gomega) { expectPlansDelivered(g, hc, c, names) }).WithTimeout(2*time.Minute).
		Should(Succeed(), "the recreated pod gets its plan again")
	t.Logf("recreated pod %s (%s, was %s) holds its plan %s after the delete", pods[0].Name, pods[0].Status.PodIP,
		oldIP, time.Since(deleted).Round(time.Second))

	// NetworkPolicy gnmic-<cluster>-api: a pod in another namespace is refused at the API port; one with the
	// operator's labels is let through (its plain HTTP request gets the TLS server's 400, proof it got there).
	restPort := c.RestPort()
	stranger := runPod(t, probePod(namespace(t, "realnode-gnmic-stranger"), "stranger", map[string]string{"app": "stranger"}))
	operatorLike := runPod(t, probePod(namespace(t, "realnode-gnmic-operator"), "operator", gnmic.OperatorPodLabels))
	reach := func(from *corev1.Pod, to *corev1.Pod) func() error {
		return func() error {
			status, body, err := fetchFrom(from, fmt.Sprintf("http://%s:%d/api/v1/config", to.Status.PodIP, restPort))
			if err != nil {
				return err
			}
			if status != http.StatusBadRequest || !strings.Contains(body, "HTTPS server") {
				return fmt.Errorf("%s/%s → %s:%d: %d %s", from.Namespace, from.Name, to.Name, restPort, status, body)
			}
			return nil
		}
	}
	for _, pod := range pods {
		g.Eventually(reach(stranger, pod)).Should(HaveOccurred(), "a pod of another namespace reaches %s's API", pod.Name)
		g.Consistently(reach(stranger, pod), 3*time.Second, time.Second).Should(HaveOccurred())
		g.Eventually(reach(operatorLike, pod)).Should(Succeed(), "a pod with the operator's labels reaches %s's API", pod.Name)
	}

	// With the policy enforced, the operator (outside the pod network, as the in-process manager is) still
	// pushes: a new Target reaches a collector.
	names = append(names, addTarget(g, ns, "r-late"))
	g.Eventually(func(g Gomega) { expectPlansDelivered(g, hc, c, names) }).WithTimeout(time.Minute).
		Should(Succeed(), "a Target added under the policy is pushed")
	t.Logf("done after %s", time.Since(started).Round(time.Second))
}
