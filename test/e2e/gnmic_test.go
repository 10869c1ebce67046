package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// Deleting a TargetSource lets the garbage collector delete the Targets it discovered (they carry it as their
// controller owner); the TargetSource controller itself deletes nothing on the way out.
func TestTargetSourceDeletionCollectsItsTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inventory"},
		Data: map[string]string{"devices.yaml": "- {hostname: leaf1, ip: 192.0.2.11}\n- {hostname: leaf2, ip: 192.0.2.12}\n- {hostname: leaf3, ip: 192.0.2.13}\n"}})).To(Succeed())
	ts := &gnmicv1alpha1.TargetSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"},
		Spec: gnmicv1alpha1.TargetSourceSpec{
			Source: gnmicv1alpha1.InventorySource{Type: gnmicv1alpha1.SourceTypeConfigMap,
				ConfigMap: &gnmicv1alpha1.ObjectSource{Name: "inventory", Key: "devices.yaml",
					Mapping: &gnmicv1alpha1.Mapping{Name: "item.hostname", Address: "item.ip"}}},
			Target: gnmicv1alpha1.TargetTemplate{Profile: "default", Port: 57400},
		},
	}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	var targets gnmicv1alpha1.TargetList
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, &targets, client.InNamespace(ns))).To(Succeed())
		g.Expect(targets.Items).To(HaveLen(3))
	}).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, ts)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, &targets, client.InNamespace(ns))).To(Succeed())
		g.Expect(targets.Items).To(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())
}

// A collector Cluster's StatefulSet becomes Ready through the StatefulSet controller and the simulated kubelet, and
// deleting the Cluster removes everything it deployed (docs/gnmic.md: owned, garbage-collected with the Cluster).
func TestGNMIcClusterDeploysAndCascades(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	cluster := &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "core"},
		Spec:       gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.45.0", Replicas: ptr.To[int32](2)},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	sts := &appsv1.StatefulSet{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gnmic-core"}, sts)).To(Succeed())
		g.Expect(sts.Status.ReadyReplicas).To(Equal(int32(2)))
		got := &gnmicv1alpha1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)), "the Cluster reads the StatefulSet the real controller reports")
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, cluster, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	g.Eventually(func(g Gomega) {
		var sets appsv1.StatefulSetList
		g.Expect(env.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		g.Expect(sets.Items).To(BeEmpty())
		var pods corev1.PodList
		g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
		var services corev1.ServiceList
		g.Expect(env.Client.List(ctx, &services, client.InNamespace(ns))).To(Succeed())
		g.Expect(services.Items).To(BeEmpty())
		var maps corev1.ConfigMapList
		g.Expect(env.Client.List(ctx, &maps, client.InNamespace(ns))).To(Succeed())
		for _, m := range maps.Items {
			g.Expect(m.Name).To(Equal("kube-root-ca.crt"), "only the namespace's own CA ConfigMap is left")
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &gnmicv1alpha1.Cluster{})).NotTo(Succeed())
	}).WithTimeout(time.Minute).Should(Succeed())
}
