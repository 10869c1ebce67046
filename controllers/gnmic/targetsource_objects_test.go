package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func TestTargetSourceConfigMapAndSecretSources(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	// A ConfigMap source without a key: every key is read in sorted order and the results concatenated.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inventory"}, Data: map[string]string{
		"b-site.yaml": "- {hostname: b1, ip: 10.2.0.1}\n",
		"a-site.json": `[{"hostname":"a1","ip":"10.1.0.1","tags":{"site":"a"}}]`,
	}}
	g.Expect(env.Client.Create(ctx, cm)).To(Succeed())
	fromCM := staticSource(ns, "cm", dev("x", "x"))
	fromCM.Spec.Source = gnmicv1alpha1.InventorySource{Type: "ConfigMap", ConfigMap: &gnmicv1alpha1.ObjectSource{
		Name: "inventory", Mapping: &gnmicv1alpha1.Mapping{Name: "item.hostname", Address: "item.ip", Labels: "item.?tags.orValue({})"}}}
	g.Expect(env.Client.Create(ctx, fromCM)).To(Succeed())
	waitReason(t, ns, "cm", gnmicv1alpha1.ReasonSucceeded)
	targets := targetsOf(g, ns, "cm")
	g.Expect(names(targets)).To(ConsistOf("cm-a1", "cm-b1"))
	g.Expect(targets["cm-a1"].Labels).To(HaveKeyWithValue("site", "a"))

	// Changing the ConfigMap's data runs the TargetSource at once.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	cm.Data["b-site.yaml"] = "- {hostname: b1, ip: 10.2.0.1}\n- {hostname: b2, ip: 10.2.0.2}\n"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(names(targetsOf(g, ns, "cm"))).To(ConsistOf("cm-a1", "cm-b1", "cm-b2"))
	}).Should(Succeed())

	// A Secret source with a key and the native list format (no mapping).
	fromSecret := staticSource(ns, "sec", dev("x", "x"))
	fromSecret.Spec.Source = gnmicv1alpha1.InventorySource{Type: "Secret", Secret: &gnmicv1alpha1.ObjectSource{Name: "devices", Key: "list"}}
	g.Expect(env.Client.Create(ctx, fromSecret)).To(Succeed())
	waitReason(t, ns, "sec", gnmicv1alpha1.ReasonSecretNotFound)
	// The Secret appearing ends the stall at once.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "devices"},
		StringData: map[string]string{"list": `[{"name":"s1","address":"10.3.0.1","port":"6030","profile":"fast","labels":{"tier":"core"}}]`}})).To(Succeed())
	ts := waitReason(t, ns, "sec", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(ts.Status.Managed).To(Equal(int32(1)))
	s1 := targetsOf(g, ns, "sec")["sec-s1"]
	g.Expect(s1.Spec).To(Equal(gnmicv1alpha1.TargetSpec{Address: "10.3.0.1:6030", Profile: "fast"}))
	g.Expect(s1.Labels).To(HaveKeyWithValue("tier", "core"))
}
