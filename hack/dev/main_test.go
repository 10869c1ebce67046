package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// TestMakeDevConverges runs what `go run ./hack/dev --exit-when-converged` runs — the cluster-grade control plane,
// every local peer, the manager with every controller, config/samples and the gitops demo — in a temporary
// directory on free ports, and checks what `make dev` promises: every sample converges through the real
// controllers, the pods they made run on the simulated nodes, re-applying the samples changes nothing, and
// stopping leaves no process behind.
func TestMakeDevConverges(t *testing.T) {
	g := NewWithT(t)
	// Bounds the whole run: the control plane's start (2m at most) plus the convergence deadline, with room to check.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	adoptOrphans(t)
	t.Cleanup(func() { expectNoChildProcesses(t) })

	checked := false
	err := run(ctx, devConfig{
		Dir:       dir,
		FleetAddr: "127.0.0.1:0", FleetSourceAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		Collectors:        true,
		RealNode:          wantRealNode(t),
		ConvergeTimeout:   convergeTimeout,
		ExitWhenConverged: true,
		Out:               t.Output(), Err: t.Output(),
		Converged: func(ctx context.Context, s *devStack) {
			g.Expect(s.kubeconfig).To(Equal(filepath.Join(dir, "kubeconfig")))
			g.Expect(s.kubeconfig).To(BeAnExistingFile())
			expectSamplePodsRunOnSimulatedNodes(ctx, t, s.env.Client)
			if s.realNode != nil {
				expectAPodRunsOnTheRealNode(ctx, t, s)
			}
			expectReapplyingSamplesIsANoOp(ctx, t, s)
			expectEverySampleReportsReadyForItsGeneration(ctx, t, s.env.Client)
			checked = true
		},
	})
	g.Expect(err).NotTo(HaveOccurred(), "every sample converges within the deadline")
	g.Expect(checked).To(BeTrue(), "the converged stack was checked before it stopped")
}

// wantRealNode says whether `make dev` runs its real node here: where the machine can (realnode.Preflight), as
// `make dev` does by default for root; under CI=true a machine that cannot fails the test, naming why.
func wantRealNode(t *testing.T) bool {
	err := realnode.Preflight()
	if err != nil && os.Getenv("CI") == "true" {
		t.Fatalf("make dev's real node: %v", err)
	}
	if err != nil {
		t.Logf("make dev without its real node: %v", err)
	}
	return err == nil
}

// expectAPodRunsOnTheRealNode: the real node is Ready beside the simulated ones, and a pod of the image it has
// imported runs there (not on a kwok node), passing its readiness probe, as the help text says.
func expectAPodRunsOnTheRealNode(ctx context.Context, t *testing.T, s *devStack) {
	g := NewWithT(t)
	var node corev1.Node
	g.Expect(s.env.Client.Get(ctx, client.ObjectKey{Name: s.realNode.Node.Name}, &node)).To(Succeed())
	g.Expect(node.Annotations).NotTo(HaveKey(testenv.SimulatedNodeAnnotation))
	g.Expect(s.help()).To(ContainSubstring(devstack.NetprobeRef))
	pod := devstack.NetprobePod("default", "dev-real-node-probe", nil)
	g.Eventually(func() error { return s.env.Client.Create(ctx, pod.DeepCopy()) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(s.env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Spec.NodeName).To(Equal(node.Name))
		g.Expect(podReady(pod)).To(BeTrue(), "pod status: %+v", pod.Status)
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// With --exit-when-converged a run whose samples do not converge in time fails, naming each of them, and still
// stops everything. No time at all is given, so none converges.
func TestMakeDevNamesWhatDidNotConverge(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adoptOrphans(t)
	t.Cleanup(func() { expectNoChildProcesses(t) })
	err := run(ctx, devConfig{
		Dir:       t.TempDir(),
		FleetAddr: "127.0.0.1:0", FleetSourceAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		ConvergeTimeout:   time.Nanosecond,
		ExitWhenConverged: true,
		Out:               t.Output(), Err: t.Output(),
		Converged: func(context.Context, *devStack) { t.Error("called although nothing converged") },
	})
	g.Expect(err).To(MatchError(ContainSubstring("not converged after 1ns")))
	g.Expect(err).To(MatchError(ContainSubstring("gNMIc Cluster core Ready")))
	g.Expect(err).To(MatchError(ContainSubstring("gitops Platform main Ready")))
}

// expectSamplePodsRunOnSimulatedNodes: the workloads the samples made (the gNMIc collectors' StatefulSet, the
// agent's and the gitops stages' Deployments) have pods, each scheduled on a kwok node, Running and Ready. The
// control plane runs nothing of its own, so every pod in the cluster is one of theirs.
func expectSamplePodsRunOnSimulatedNodes(ctx context.Context, t *testing.T, c client.Client) {
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.List(ctx, &pods)).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		var names []string
		for _, p := range pods.Items {
			name := p.Namespace + "/" + p.Name
			names = append(names, name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), name)
			g.Expect(podReady(&p)).To(BeTrue(), name+" is Ready")
			var node corev1.Node
			g.Expect(c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node)).To(Succeed(), name+" is scheduled")
			g.Expect(node.Annotations).To(HaveKeyWithValue(testenv.SimulatedNodeAnnotation, "fake"),
				name+" runs on a simulated node")
		}
		// The collectors of the sample Cluster "core", the sample agent's replicas and the gitops Platform's stages.
		for _, workload := range []string{"default/gnmic-core-", "default/my-agent-", "default/katastroma-source-",
			"default/katastroma-pharos-"} {
			g.Expect(names).To(ContainElement(HavePrefix(workload)), "a pod of %s*", workload)
		}
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// expectReapplyingSamplesIsANoOp: applying config/samples again, as a second `make dev` against the same objects
// would, applies as many objects and changes no sample's spec (its generation stays).
func expectReapplyingSamplesIsANoOp(ctx context.Context, t *testing.T, s *devStack) {
	g := NewWithT(t)
	files := sampleFiles(t)
	g.Expect(s.applied).To(BeNumerically(">=", len(files)), "every sample file listed in kustomization.yaml is applied")
	before := sampleGenerations(ctx, t, s.env.Client, files)
	again, err := testenv.ApplySamples(ctx, s.env.Client, samplesDir(), "default", "make-dev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(s.applied))
	g.Expect(sampleGenerations(ctx, t, s.env.Client, files)).To(Equal(before))
}

// expectEverySampleReportsReadyForItsGeneration: every kind has a status with observedGeneration and a Ready
// condition, and every sample reaches Ready=True for its current generation — read generically from each object,
// so a kind that writes no such status fails here, whatever its own steady state says.
func expectEverySampleReportsReadyForItsGeneration(ctx context.Context, t *testing.T, c client.Client) {
	g := NewWithT(t)
	kinds := map[string]bool{}
	samples := sampleObjects(t, c, sampleFiles(t))
	for _, u := range samples {
		kinds[u.GroupVersionKind().GroupKind().String()] = true
	}
	// Every kind of every group has a sample, so none escapes the check.
	g.Expect(kinds).To(Equal(operatorKinds(t)))
	// The ExternalAttributeSync sample reads a public URL that does not resolve here (make dev adds
	// dev-file-source, reading a local file, which must be Ready): it must say so, for its generation.
	notReadyAsExpected := map[string]string{"ExternalAttributeSync default/cmdb-racks": fleetv1alpha1.ReasonSourceFailed}
	devSync := &unstructured.Unstructured{}
	devSync.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("ExternalAttributeSync"))
	devSync.SetNamespace("default")
	devSync.SetName("dev-file-source")
	samples = append(samples, devSync)
	g.Eventually(func(g Gomega) {
		var notReady []string
		for _, u := range samples {
			name := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(u), live)).To(Succeed())
			observed, found, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
			if !found || observed != live.GetGeneration() {
				notReady = append(notReady, fmt.Sprintf("%s: status.observedGeneration %d (found: %t), generation %d",
					name, observed, found, live.GetGeneration()))
				continue
			}
			conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			want := map[string]any{"type": "Ready", "status": "True"}
			if reason, ok := notReadyAsExpected[name]; ok {
				want = map[string]any{"type": "Ready", "status": "False", "reason": reason}
			}
			if !slices.ContainsFunc(conditions, func(c any) bool { return hasFields(c, want) }) {
				notReady = append(notReady, fmt.Sprintf("%s: no condition %v in %v", name, want, conditions))
			}
		}
		g.Expect(notReady).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// hasFields: obj is a map holding every key of want with the same value.
func hasFields(obj any, want map[string]any) bool {
	m, _ := obj.(map[string]any)
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

// operatorKinds are the group/kinds of the operator's CRDs (config/crd/bases).
func operatorKinds(t *testing.T) map[string]bool {
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]bool{}
	for _, file := range files {
		crds, err := testenv.ReadObjects(file)
		g.Expect(err).NotTo(HaveOccurred())
		for _, crd := range crds {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			kinds[kind+"."+group] = true
		}
	}
	g.Expect(kinds).To(HaveLen(len(files)))
	return kinds
}

// sampleFiles are the files config/samples/kustomization.yaml lists.
func sampleFiles(t *testing.T) []string {
	data, err := os.ReadFile(filepath.Join(samplesDir(), "kustomization.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var k struct {
		Resources []string `json:"resources"`
	}
	NewWithT(t).Expect(yaml.Unmarshal(data, &k)).To(Succeed())
	files := make([]string, 0, len(k.Resources))
	for _, r := range k.Resources {
		files = append(files, filepath.Join(samplesDir(), r))
	}
	return files
}

// sampleObjects reads the objects of files, in the namespace make dev applies them to ("default") unless
// cluster-scoped.
func sampleObjects(t *testing.T, c client.Client, files []string) []*unstructured.Unstructured {
	g := NewWithT(t)
	var out []*unstructured.Unstructured
	for _, file := range files {
		objs, err := testenv.ReadObjects(file)
		g.Expect(err).NotTo(HaveOccurred())
		for _, u := range objs {
			namespaced, err := c.IsObjectNamespaced(u)
			g.Expect(err).NotTo(HaveOccurred())
			if namespaced && u.GetNamespace() == "" {
				u.SetNamespace("default")
			}
			out = append(out, u)
		}
	}
	return out
}

// sampleGenerations maps every sample object (kind/namespace/name) to its metadata.generation in the cluster.
func sampleGenerations(ctx context.Context, t *testing.T, c client.Client, files []string) map[string]int64 {
	g := NewWithT(t)
	generations := map[string]int64{}
	for _, u := range sampleObjects(t, c, files) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(u), live)).To(Succeed())
		generations[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = live.GetGeneration()
	}
	return generations
}

// expectNoChildProcesses: the control plane, the gitops git daemon and everything else run started are gone once
// it returned (processes are waited for, so none lingers even as a zombie). The test process is made a child
// subreaper (adoptOrphans), so a grandchild whose parent ended without stopping it is counted too.
func expectNoChildProcesses(t *testing.T) {
	NewWithT(t).Eventually(childProcesses).WithTimeout(30*time.Second).Should(BeEmpty(),
		"processes this test started are still running")
}

// adoptOrphans makes this process the parent of any orphaned descendant (PR_SET_CHILD_SUBREAPER), so that
// childProcesses sees processes whose own parent ended before them.
func adoptOrphans(t *testing.T) {
	NewWithT(t).Expect(unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)).To(Succeed())
}

// childProcesses lists "pid command" of every live process whose parent is this one (zombies, which have ended,
// are left out: an adopted orphan is not waited for by anyone here).
func childProcesses() ([]string, error) {
	self := strconv.Itoa(os.Getpid())
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var children []string
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces, so split after its closing parenthesis.
		end := strings.LastIndexByte(string(data), ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(string(data[end+1:]))
		if len(fields) >= 2 && fields[1] == self && fields[0] != "Z" {
			children = append(children, strings.TrimSpace(string(data[:end+1])))
		}
	}
	return children, nil
}
