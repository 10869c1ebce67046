package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// An inventory schema change that breaks the mapping of some devices deletes none of their Targets: a device the
// inventory still lists but cannot be mapped keeps its Target and Degraded is True (InvalidDevices); an invalid
// device that cannot even be named holds every deletion of the run (Ready False, InvalidDevices), since it may be
// any of them.
func TestTargetSourceMappingErrorDeletesNoTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	inventory := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inv"}, Data: map[string]string{"devices.json": `[
		{"name":"r1","mgmt":{"ip":"10.0.0.1"}}, {"name":"r2","mgmt":{"ip":"10.0.0.2"}},
		{"name":"r3","mgmt":{"ip":"10.0.0.3"}}, {"name":"r4","mgmt":{"ip":"10.0.0.4"}}]`}}
	g.Expect(env.Client.Create(ctx, inventory)).To(Succeed())
	ts := staticSource(ns, "inv")
	ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "ConfigMap", ConfigMap: &gnmicv1alpha1.ObjectSource{
		Name: "inv", Key: "devices.json", Mapping: &gnmicv1alpha1.Mapping{Address: "item.mgmt.ip"}}}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(names(targetsOf(g, ns, "inv"))).To(ConsistOf("inv-r1", "inv-r2", "inv-r3", "inv-r4"))

	// r2 loses its mgmt block: MappingError(address). Its Target stays.
	setInventory := func(doc string) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inventory), inventory)).To(Succeed())
		inventory.Data["devices.json"] = doc
		g.Expect(env.Client.Update(ctx, inventory)).To(Succeed())
	}
	setInventory(`[{"name":"r1","mgmt":{"ip":"10.0.0.1"}}, {"name":"r2","ip":"10.0.0.2"},
		{"name":"r3","mgmt":{"ip":"10.0.0.3"}}, {"name":"r4","mgmt":{"ip":"10.0.0.4"}}]`)
	var got *gnmicv1alpha1.TargetSource
	g.Eventually(func(g Gomega) {
		got = getTS(g, ns, "inv")
		g.Expect(got.Status.Invalid).To(Equal(int32(1)))
	}).Should(Succeed())
	g.Expect(got.Status.FailedDevices).To(ConsistOf(gnmicv1alpha1.FailedDevice{Name: "r2", Reason: "MappingError(address)"}))
	g.Expect(got.Status.Pruned).To(BeZero())
	g.Expect(got.Status.Managed).To(Equal(int32(4)))
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.TargetSourceConditionDegraded)).To(BeTrue())
	g.Expect(names(targetsOf(g, ns, "inv"))).To(ConsistOf("inv-r1", "inv-r2", "inv-r3", "inv-r4"))

	// r3 leaves the inventory while an entry cannot even be named: the deletion is held.
	setInventory(`[{"name":"r1","mgmt":{"ip":"10.0.0.1"}}, {"name":"r2","mgmt":{"ip":"10.0.0.2"}},
		"not-a-device", {"name":"r4","mgmt":{"ip":"10.0.0.4"}}]`)
	g.Eventually(func(g Gomega) {
		got = getTS(g, ns, "inv")
		g.Expect(got.Status.FailedDevices).To(ConsistOf(gnmicv1alpha1.FailedDevice{Reason: "NotAnObject"}))
		rec := meta.FindStatusCondition(got.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReconciling)
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.Reason).To(Equal(gnmicv1alpha1.ReasonInvalidDevices))
		g.Expect(rec.Message).To(ContainSubstring("deletions held"))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReady).Reason).To(Equal(gnmicv1alpha1.ReasonInvalidDevices))
	}).Should(Succeed())
	g.Expect(names(targetsOf(g, ns, "inv"))).To(ConsistOf("inv-r1", "inv-r2", "inv-r3", "inv-r4"))

	// A clean inventory: Ready again, Degraded gone, r3 pruned.
	setInventory(`[{"name":"r1","mgmt":{"ip":"10.0.0.1"}}, {"name":"r2","mgmt":{"ip":"10.0.0.2"}}, {"name":"r4","mgmt":{"ip":"10.0.0.4"}}]`)
	got = waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, gnmicv1alpha1.TargetSourceConditionDegraded)).To(BeNil())
	g.Expect(names(targetsOf(g, ns, "inv"))).To(ConsistOf("inv-r1", "inv-r2", "inv-r4"))
}
