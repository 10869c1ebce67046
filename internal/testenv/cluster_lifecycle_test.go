package testenv_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// crashLoopLabel is the label testenv.CrashLoopStage selects.
const crashLoopLabel = testenv.CrashLoopLabel

// crashLoopStage is the ClusterOptions.ExtraStages of this package.
const crashLoopStage = testenv.CrashLoopStage

// ClusterOptions.ExtraStages reach kwok: a pod the package's extra stage selects runs, then crashes into
// CrashLoopBackOff, while an unlabelled pod beside it stays Ready.
func TestExtraStageSimulatesACrashLoop(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	crashing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashing",
		Labels: map[string]string{crashLoopLabel: "crash-loop"}}, Spec: restrictedPod(nil).Spec}
	healthy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healthy"}, Spec: restrictedPod(nil).Spec}
	g.Expect(env.Client.Create(ctx, crashing)).To(Succeed())
	g.Expect(env.Client.Create(ctx, healthy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crashing), crashing)).To(Succeed())
		g.Expect(crashing.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(crashing.Status.ContainerStatuses).To(HaveLen(1))
		status := crashing.Status.ContainerStatuses[0]
		g.Expect(status.State.Waiting).NotTo(BeNil())
		g.Expect(status.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
		g.Expect(status.RestartCount).To(Equal(int32(3)))
		g.Expect(podCondition(crashing, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(healthy), healthy)).To(Succeed())
		g.Expect(podCondition(healthy, corev1.PodReady)).To(Equal(corev1.ConditionTrue))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// The pod-complete stage ends a Job's pod with success, and the real Job controller marks the Job Complete.
func TestJobPodCompletesAndTheJobIsComplete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	tpl := restrictedPod(map[string]string{"app": "once"})
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once"},
		Spec: batchv1.JobSpec{Template: tpl, BackoffLimit: ptr.To[int32](0)}}
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Status.Succeeded).To(Equal(int32(1)))
		g.Expect(job.Status.Failed).To(BeZero())
		g.Expect(job.Status.CompletionTime).NotTo(BeNil())
		g.Expect(job.Status.Conditions).To(ContainElement(And(
			HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(time.Minute).Should(Succeed())
	var pods corev1.PodList
	g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "once"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(pods.Items[0].Spec.NodeName).To(HavePrefix("kwok-node-"), "the pod ran on a simulated node")
}

// The disruption controller computes a PodDisruptionBudget's status from the ready pods it covers.
func TestDisruptionBudgetCountsReadyPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	labels := map[string]string{"app": "guarded"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: restrictedPod(labels)}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	g.Expect(env.Client.Create(ctx, pdb)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
		g.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation))
		g.Expect(pdb.Status.ExpectedPods).To(Equal(int32(3)))
		g.Expect(pdb.Status.CurrentHealthy).To(Equal(int32(3)))
		g.Expect(pdb.Status.DesiredHealthy).To(Equal(int32(2)))
		g.Expect(pdb.Status.DisruptionsAllowed).To(Equal(int32(1)))
		g.Expect(pdb.Status.Conditions).To(ContainElement(And(
			HaveField("Type", policyv1.DisruptionAllowedCondition), HaveField("Status", metav1.ConditionTrue))))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// kwok renews every simulated node's Lease in kube-node-lease, as a kubelet does, so the node-lifecycle controller
// keeps the nodes Ready and untainted instead of evicting their pods.
func TestNodeLeasesAreRenewedAndNodesStayReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var nodes corev1.NodeList
	g.Expect(env.Client.List(ctx, &nodes)).To(Succeed())
	renewed := map[string]time.Time{}
	for _, n := range nodes.Items {
		if n.Annotations[testenv.SimulatedNodeAnnotation] != "fake" {
			continue
		}
		lease := &coordinationv1.Lease{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: n.Name}, lease)).
			To(Succeed(), "node %s has a lease", n.Name)
		// kwok holds the lease under its own identity (a kubelet uses the node's name), owned by the Node.
		g.Expect(lease.OwnerReferences).To(ContainElement(And(HaveField("Kind", "Node"), HaveField("UID", n.UID))))
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))
		g.Expect(lease.Spec.LeaseDurationSeconds).To(HaveValue(Equal(int32(40))))
		g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
		renewed[n.Name] = lease.Spec.RenewTime.Time
	}
	g.Expect(renewed).To(HaveLen(2), "both simulated nodes hold a lease")
	// kwok renews well within the 40 s lease duration; one renewal of each proves it is still at work.
	g.Eventually(func(g Gomega) {
		for name, before := range renewed {
			lease := &coordinationv1.Lease{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", before), "lease of %s renewed", name)
		}
	}).WithTimeout(45 * time.Second).WithPolling(time.Second).Should(Succeed())
	for name := range renewed {
		node := &corev1.Node{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		g.Expect(nodeCondition(node, corev1.NodeReady)).To(Equal(corev1.ConditionTrue), "node %s is Ready", name)
		g.Expect(node.Spec.Taints).To(BeEmpty(), "the node-lifecycle controller tainted node %s", name)
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
