package realnode

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// unlistedPort is served by every stage stand-in but declared by no stage: no policy rule names it, so once the
// policies apply it must answer nobody.
const unlistedPort = 8081

// docsCallers is the table of docs/gitops.md ("NetworkPolicy" row of the Platform's children): who calls each
// stage's gRPC port.
var docsCallers = map[string][]string{
	gitopsv1alpha1.StageSource:      {gitopsv1alpha1.StagePharos},
	gitopsv1alpha1.StageRenderer:    {gitopsv1alpha1.StageSource},
	gitopsv1alpha1.StageOrderer:     {gitopsv1alpha1.StagePruner, gitopsv1alpha1.StageRenderer},
	gitopsv1alpha1.StageLabeler:     {gitopsv1alpha1.StageOrderer},
	gitopsv1alpha1.StageProvisioner: {gitopsv1alpha1.StageLabeler},
	gitopsv1alpha1.StagePruner:      {gitopsv1alpha1.StageProvisioner},
}

// platformAsReconciled creates a Platform and reads it back as the controller reads it (the CRD's defaults filled
// in by the API server), then applies the controller's one in-code default, the image; it must validate, or the
// controller would render nothing.
func platformAsReconciled(t *testing.T, ns, name string) *gitopsv1alpha1.Platform {
	t.Helper()
	g := NewWithT(t)
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Expect(env.Client.Create(context.Background(), p)).To(Succeed())
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), p)).To(Succeed())
	g.Expect(p.Spec.LeaseStaleAfter).NotTo(BeNil(), "the API server applied the CRD's defaults")
	if p.Spec.Image == "" {
		p.Spec.Image = "quartet.test/katastroma:default" // the operator's --katastroma-default-image
	}
	g.Expect(platform.Validate(p)).To(BeEmpty())
	return p
}

// dialedBy reads who dials each stage's gRPC port from the rendered command lines (--next, --orderer,
// --source-handler[s]): the callers the policies must admit, taken from what the stages really do.
func dialedBy(p *gitopsv1alpha1.Platform) map[string][]string {
	out := map[string][]string{}
	for _, caller := range platform.Stages {
		for _, arg := range platform.Deployment(p, caller).Spec.Template.Spec.Containers[0].Args {
			_, value, _ := strings.Cut(arg, "=")
			for _, addr := range strings.Split(value, ",") {
				for _, callee := range platform.Stages {
					if callee != gitopsv1alpha1.StagePharos && addr == platform.Endpoint(p, callee) &&
						!slices.Contains(out[callee], caller) {
						out[callee] = append(out[callee], caller)
					}
				}
			}
		}
	}
	for _, callers := range out {
		sort.Strings(callers)
	}
	return out
}

// stageStandIn is netprobe dressed as one stage's pod: the labels, container ports and probes of the pod template
// platform.Deployment renders, serving every declared port and unlistedPort.
func stageStandIn(p *gitopsv1alpha1.Platform, stage, name string) *corev1.Pod {
	tmpl := platform.Deployment(p, stage).Spec.Template
	rendered := tmpl.Spec.Containers[0]
	pod := probePod(p.Namespace, name, tmpl.Labels)
	c := &pod.Spec.Containers[0]
	listen := []string{fmt.Sprintf(":%d", unlistedPort)}
	for _, port := range rendered.Ports {
		listen = append(listen, fmt.Sprintf(":%d", port.ContainerPort))
	}
	c.Args = []string{"--listen=" + strings.Join(listen, ",")}
	c.Ports = rendered.Ports
	c.ReadinessProbe, c.LivenessProbe = rendered.ReadinessProbe.DeepCopy(), rendered.LivenessProbe.DeepCopy()
	return pod
}

// startPods creates every pod, then waits until each is Ready on the real node (they start side by side), and
// updates each to what the API server has (its IP).
func startPods(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	g := NewWithT(t)
	for _, pod := range pods {
		// Admission refuses pods until the controller-manager has made the namespace's default ServiceAccount.
		g.Eventually(func() error { return env.Client.Create(context.Background(), pod.DeepCopy()) }).Should(Succeed(), pod.Name)
	}
	for _, pod := range pods {
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Spec.NodeName).To(Equal(node.Name))
			g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", pod.Status)
		}).Should(Succeed(), "%s/%s Ready", pod.Namespace, pod.Name)
	}
}

// peer is a pod the test sends requests from.
type peer struct {
	name    string
	pod     *corev1.Pod
	control int32  // the port the test asks it to fetch through (from the node, which policies always admit)
	stage   string // the stage of the Platform under test it is, if it is one
	// collector: it is the Platform's OTel Collector (its labels, in its namespace).
	collector bool
}

// flow is one connection the test tries and what the policies must make of it.
type flow struct {
	from   peer
	to     string // what is reached, for messages
	target string // URL
	want   bool
}

// attempt tries a flow once from inside its source pod: nil when the outcome is the wanted one.
func (f flow) attempt() error {
	status, body, err := get(fmt.Sprintf("http://%s:%d/fetch?url=%s", f.from.pod.Status.PodIP, f.from.control, url.QueryEscape(f.target)))
	if err != nil {
		return fmt.Errorf("%s → %s: asking the source pod: %w", f.from.name, f.to, err)
	}
	got := status == http.StatusOK
	if got == f.want {
		return nil
	}
	if f.want {
		return fmt.Errorf("%s → %s: refused, should be admitted (%d %s)", f.from.name, f.to, status, strings.TrimSpace(body))
	}
	return fmt.Errorf("%s → %s: admitted, should be refused", f.from.name, f.to)
}

// mismatches tries every flow (a few dozen at a time: a refused one waits out netprobe's 2 s fetch timeout) and
// lists, sorted, those whose outcome is not the wanted one.
func mismatches(flows []flow) []string {
	var (
		mu  sync.Mutex
		out []string
		wg  sync.WaitGroup
	)
	slots := make(chan struct{}, 32)
	for _, f := range flows {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := f.attempt(); err != nil {
				mu.Lock()
				out = append(out, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Strings(out)
	return out
}

// TestGitOpsStageNetworkPoliciesByTraffic renders, for a Platform as the controller reads it, every stage's
// NetworkPolicy (platform.NetworkPolicy) and applies them to stand-ins of the stage pods (the rendered labels,
// container ports and probes), beside the Platform's collector, a stranger and pods that carry the labels of a
// stage or collector but belong to another Platform or namespace. It checks by traffic what docs/gitops.md and
// docs/pharos.md claim: a stage's gRPC port admits exactly the stages whose rendered command line dials it;
// pharos's OTLP ports (on the pod and through its Service) admit the six pipeline stages and the collector of its
// Platform and namespace only; metrics and the source handler's webhook admit anyone; a port no rule names admits
// nobody; egress stays open; the kubelet's probes still pass. Before the policies every flow is admitted, so the
// refusals are the policies' doing.
func TestGitOpsStageNetworkPoliciesByTraffic(t *testing.T) {
	g := NewWithT(t)
	started := time.Now()
	ns, elsewhere := namespace(t, "realnode-platform"), namespace(t, "realnode-elsewhere")
	p := platformAsReconciled(t, ns, "main")

	dials := dialedBy(p)
	g.Expect(dials).To(Equal(docsCallers), "the stages' command lines dial whom docs/gitops.md says")

	standIns := map[string]*corev1.Pod{}
	var pods []*corev1.Pod
	for _, stage := range platform.Stages {
		standIns[stage] = stageStandIn(p, stage, stage)
		pods = append(pods, standIns[stage])
	}
	collector := probePod(ns, "collector", platform.CollectorPodLabels(p))
	stranger := probePod(ns, "stranger", map[string]string{"app": "stranger"})
	// Another Platform of the namespace: its pruner's labels differ from ours only in the instance.
	otherPlatform := probePod(ns, "other-platform-pruner", platform.Labels(&gitopsv1alpha1.Platform{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}, gitopsv1alpha1.StagePruner))
	// A Platform of the same name in another namespace: labels identical to ours.
	twin := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: p.Name}}
	twinPharos := probePod(elsewhere, "twin-pharos", platform.Labels(twin, gitopsv1alpha1.StagePharos))
	twinCollector := probePod(elsewhere, "twin-collector", platform.CollectorPodLabels(twin))
	pods = append(pods, collector, stranger, otherPlatform, twinPharos, twinCollector)
	startPods(t, pods...)
	pharosSvc := platform.Service(p, gitopsv1alpha1.StagePharos)
	g.Expect(env.Client.Create(context.Background(), pharosSvc)).To(Succeed())
	g.Expect(pharosSvc.Spec.ClusterIP).NotTo(BeEmpty())
	t.Logf("Platform, %d pods and pharos's Service up in %s", len(pods), time.Since(started).Round(time.Second))

	stagePeers := map[string]peer{}
	peers := []peer{
		{name: "collector", pod: collector, control: 8080, collector: true},
		{name: "stranger (same namespace)", pod: stranger, control: 8080},
		{name: "pruner of Platform other (same namespace)", pod: otherPlatform, control: 8080},
		{name: "pharos labels in namespace " + elsewhere, pod: twinPharos, control: 8080},
		{name: "collector labels in namespace " + elsewhere, pod: twinCollector, control: 8080},
	}
	for _, stage := range platform.Stages {
		stagePeers[stage] = peer{name: "stage " + stage, pod: standIns[stage], control: platform.MetricsPort, stage: stage}
		peers = append(peers, stagePeers[stage])
	}

	// What the docs claim each port admits.
	admits := func(stage, port string, from peer) bool {
		switch port {
		case "metrics", "webhook":
			return true
		case "grpc":
			return slices.Contains(dials[stage], from.stage)
		case "otlp-grpc", "otlp-http":
			return from.collector || (from.stage != "" && from.stage != gitopsv1alpha1.StagePharos)
		}
		return false
	}
	var flows []flow
	for _, stage := range platform.Stages {
		pod := standIns[stage]
		ports := append(slices.Clone(pod.Spec.Containers[0].Ports), corev1.ContainerPort{Name: "unlisted", ContainerPort: unlistedPort})
		for _, port := range ports {
			for _, from := range peers {
				if from.pod == pod {
					continue // a pod reaching itself never leaves it
				}
				flows = append(flows, flow{from: from, want: admits(stage, port.Name, from),
					to:     fmt.Sprintf("%s %s (%d)", stage, port.Name, port.ContainerPort),
					target: fmt.Sprintf("http://%s:%d/healthz", pod.Status.PodIP, port.ContainerPort)})
			}
		}
	}
	for _, port := range pharosSvc.Spec.Ports {
		if port.Name != "otlp-grpc" && port.Name != "otlp-http" {
			continue
		}
		for _, from := range peers {
			// Through the Service, as the collector sends; pharos does not export to itself (and its own Service
			// would bring the connection back to it masqueraded as the node).
			if from.pod != standIns[gitopsv1alpha1.StagePharos] {
				flows = append(flows, flow{from: from, want: admits(gitopsv1alpha1.StagePharos, port.Name, from),
					to:     fmt.Sprintf("pharos Service %s (%s:%d)", port.Name, pharosSvc.Spec.ClusterIP, port.Port),
					target: fmt.Sprintf("http://%s:%d/healthz", pharosSvc.Spec.ClusterIP, port.Port)})
			}
		}
	}
	// Egress is open: every stage reaches a pod elsewhere (the API server, git hosts and the collector in the docs).
	for _, stage := range platform.Stages {
		flows = append(flows, flow{from: stagePeers[stage],
			to: "a pod in namespace " + elsewhere, target: fmt.Sprintf("http://%s:8080/healthz", twinCollector.Status.PodIP), want: true})
	}

	// Before the policies every flow is admitted: what is refused below is refused by them.
	before := make([]flow, len(flows))
	for i, f := range flows {
		f.want = true
		before[i] = f
	}
	g.Eventually(func() []string { return mismatches(before) }).Should(BeEmpty(), "before the policies")
	t.Logf("%d flows, all admitted before the policies (%s)", len(flows), time.Since(started).Round(time.Second))

	for _, stage := range platform.Stages {
		g.Expect(env.Client.Create(context.Background(), platform.NetworkPolicy(p, stage))).To(Succeed(), stage)
	}
	// The firewall syncs within seconds; a wrong policy shows as the same mismatches on every pass.
	g.Eventually(func() []string { return mismatches(flows) }, 3*time.Minute, time.Second).Should(BeEmpty(), "with the policies")
	g.Expect(mismatches(flows)).To(BeEmpty(), "and still on a second pass")
	t.Logf("every flow as the docs say with the policies (%s)", time.Since(started).Round(time.Second))

	// The kubelet's probes (gRPC on 50051, pharos's GET /healthz on 4318) come from the node: a second pod of each
	// stage, started under the policies, gets Ready, and the first ones stayed Ready.
	var second []*corev1.Pod
	for _, stage := range platform.Stages {
		second = append(second, stageStandIn(p, stage, stage+"-2"))
	}
	startPods(t, second...)
	for _, stage := range platform.Stages {
		pod := standIns[stage]
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))),
			"%s stayed Ready", stage)
		g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(HaveField("RestartCount", BeZero())), "%s: no liveness restart", stage)
	}
	t.Logf("done in %s", time.Since(started).Round(time.Second))
}
