package gnmic_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// restrictedNamespace is a namespace whose pods must meet the restricted Pod Security standard.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gnmic-%d", namespaceCounter.Add(1)),
		Labels: map[string]string{testenv.PodSecurityEnforceLabel: "restricted"}}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// collectorPods lists the pods of a Cluster's StatefulSet.
func collectorPods(g Gomega, ns, clusterName string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(context.Background(), pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": clusterName})).To(Succeed())
	return pods.Items
}

// The upstream gNMIc image runs as root; the simulated kubelet, like the real one, refuses runAsNonRoot on it
// without a runAsUser. The default template names UID/GID 65532, so the collectors start under restricted Pod
// Security and the StatefulSet becomes Ready. (With runAsNonRoot and no UID the pods waited in
// CreateContainerConfigError and the Cluster never became Ready.)
func TestClusterPodsStartUnderRestrictedPodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := restrictedNamespace(t)
	c := cluster(g, ns, "secure", 2, collectors(t, 2))
	c.Spec.Image = "ghcr.io/openconfig/gnmic:0.47.0"
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := collectorPods(g, ns, "secure")
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				g.Expect(cs.State.Waiting).To(BeNil(), "pod %s", p.Name)
			}
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(p.Spec.SecurityContext.RunAsUser).To(Equal(ptr.To(gnmicv1alpha1.DefaultCollectorUID)))
			g.Expect(p.Spec.SecurityContext.RunAsGroup).To(Equal(ptr.To(gnmicv1alpha1.DefaultCollectorUID)))
		}
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := &gnmicv1alpha1.Cluster{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "secure"}, got)).To(Succeed())
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
	}).Should(Succeed())
}

// Leaving the UID to the platform on a cluster that assigns none reproduces the old template: the kubelet stand-in
// refuses the pod, so the stage that makes the test above meaningful is itself shown to fire.
func TestClusterPlatformUIDOnPlainKubernetesIsRefusedLikeTheKubelet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := restrictedNamespace(t)
	c := cluster(g, ns, "platform", 1, collectors(t, 1))
	c.Spec.PodTemplate = &gnmicv1alpha1.CollectorPodTemplate{UIDAssignment: gnmicv1alpha1.UIDAssignmentPlatform}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := collectorPods(g, ns, "platform")
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Spec.SecurityContext.RunAsUser).To(BeNil())
		g.Expect(pods[0].Status.ContainerStatuses).To(HaveLen(1))
		w := pods[0].Status.ContainerStatuses[0].State.Waiting
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
	}).Should(Succeed())
}

// spec.podTemplate reaches the pods: scheduling, pull secrets, and a security context whose fields win one by one.
func TestClusterPodTemplateOverrides(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := restrictedNamespace(t)
	c := cluster(g, ns, "placed", 1, collectors(t, 1))
	c.Spec.PodTemplate = &gnmicv1alpha1.CollectorPodTemplate{
		NodeSelector:     map[string]string{"type": "kwok"},
		Tolerations:      []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "telemetry", Effect: corev1.TaintEffectNoSchedule}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "placed"}}}}}}},
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := collectorPods(g, ns, "placed")
		g.Expect(pods).To(HaveLen(1))
		p := pods[0]
		g.Expect(p.Spec.NodeSelector).To(Equal(map[string]string{"type": "kwok"}))
		g.Expect(p.Spec.Tolerations).To(ContainElement(HaveField("Key", "dedicated")))
		g.Expect(p.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry"}}))
		g.Expect(p.Spec.Affinity.PodAntiAffinity).NotTo(BeNil())
		g.Expect(p.Spec.SecurityContext.RunAsUser).To(Equal(ptr.To[int64](1000)))
		g.Expect(p.Spec.SecurityContext.RunAsGroup).To(Equal(ptr.To(gnmicv1alpha1.DefaultCollectorUID)))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
	}).Should(Succeed())
}
