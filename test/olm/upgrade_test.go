package olm

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
	"github.com/quartet-dev/quartet-operator/internal/testenv/olminstall"
)

// upgradeThroughCatalog publishes a next release in the catalog and lets OLM upgrade the Subscription to it: the
// custom resources stay (same objects, every status exactly as before), the new manager runs from the new CSV's
// Deployment with the certificate the new webhook configurations trust, and it reconciles both a change made while
// no manager ran (during the upgrade) and one made after it.
func upgradeThroughCatalog(t *testing.T, opm string, catalog *olminstall.Catalog, sub *operatorsv1alpha1.Subscription, m *asinstalled.Manager) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	// OLM replaces the manager's pod during an upgrade: the old manager stops first (no manager runs until the
	// new one starts), so nothing but the upgrade itself can touch the custom resources' status meanwhile.
	g.Expect(m.Process.Stop()).To(Succeed())
	before := sampleObjects(g)

	nextDir := t.TempDir()
	next, err := catalog.WithNextRelease(opm, nextDir, "0.1.1")
	g.Expect(err).NotTo(HaveOccurred())
	nextAddr := olminstall.ServeCatalog(t, env, "opm-serve-next", opm, nextDir)
	// The catalog now served at a new address: as when a CatalogSource's image is updated to a new catalog.
	source := &operatorsv1alpha1.CatalogSource{}
	g.Expect(olmClient.Get(ctx, types.NamespacedName{Namespace: sub.Spec.CatalogSourceNamespace, Name: sub.Spec.CatalogSource}, source)).To(Succeed())
	patch := client.MergeFrom(source.DeepCopy())
	source.Spec.Address = nextAddr
	g.Expect(olmClient.Patch(ctx, source, patch)).To(Succeed())
	// A change made while no manager runs must not be lost: a new device in the inventory.
	addDevice(g, "leaf8", "192.0.2.18")

	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	g.Eventually(func(g Gomega) {
		g.Expect(olmClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
		g.Expect(sub.Status.InstalledCSV).To(Equal(next), "subscription: %s", sub.Status.State)
		g.Expect(olmClient.Get(ctx, types.NamespacedName{Namespace: installNamespace, Name: next}, csv)).To(Succeed())
		g.Expect(csv.Status.Phase).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded), "CSV %s: %s", csv.Status.Reason, csv.Status.Message)
		err := olmClient.Get(ctx, types.NamespacedName{Namespace: installNamespace, Name: catalog.BundleName}, &operatorsv1alpha1.ClusterServiceVersion{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the replaced CSV %s is removed", catalog.BundleName)
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: installNamespace, Name: deploymentName}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue("quartet.dev/release", "0.1.1"), "the Deployment is the new CSV's")
	g.Eventually(func(g Gomega) { webhooksTrustServingCert(g, csv) }).WithTimeout(time.Minute).Should(Succeed())

	// The new release's CRDs are in place: every custom resource is the same object with the same status.
	after := sampleObjects(g)
	g.Expect(after).To(HaveLen(len(before)))
	for key, was := range before {
		now := after[key]
		g.Expect(now).NotTo(BeNil(), key)
		g.Expect(now.GetUID()).To(Equal(was.GetUID()), "%s is the same object after the upgrade", key)
		g.Expect(now.Object["status"]).To(Equal(was.Object["status"]), "%s keeps its status through the upgrade", key)
	}

	// The new manager runs as the new Deployment says, and picks up the change made while none ran.
	m.Restart(t, "manager-next")
	m.ApplySamples(t)
	m.WaitConverged(t)
	g.Eventually(func(g Gomega) { g.Expect(targetNames(g)).To(ContainElement(ContainSubstring("leaf8"))) }).
		WithTimeout(2*time.Minute).Should(Succeed(), "the device added during the upgrade becomes a Target")

	// A change after the upgrade is reconciled by the new manager too.
	addDevice(g, "leaf9", "192.0.2.19")
	g.Eventually(func(g Gomega) { g.Expect(targetNames(g)).To(ContainElement(ContainSubstring("leaf9"))) }).
		WithTimeout(2 * time.Minute).Should(Succeed())
	m.AssertNothingForbidden(t)
}

// addDevice adds a device to the sample TargetSource's inventory ConfigMap.
func addDevice(g Gomega, hostname, ip string) {
	ctx := context.Background()
	inventory := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "device-inventory"}, inventory)).To(Succeed())
	inventory.Data["devices.yaml"] += "- {hostname: " + hostname + ", mgmt_ip: " + ip + ", site: ams}\n"
	g.Expect(env.Client.Update(ctx, inventory)).To(Succeed())
}

// targetNames lists the names of the Targets in the samples' namespace.
func targetNames(g Gomega) []string {
	targets := &gnmicv1alpha1.TargetList{}
	g.Expect(env.Client.List(context.Background(), targets, client.InNamespace("default"))).To(Succeed())
	var names []string
	for _, tg := range targets.Items {
		names = append(names, tg.Name)
	}
	return names
}

// sampleObjects reads each object of config/samples as it is stored, by kind and namespace/name.
func sampleObjects(g Gomega) map[string]*unstructured.Unstructured {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	objects := map[string]*unstructured.Unstructured{}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		objs, err := testenv.ReadObjects(file)
		g.Expect(err).NotTo(HaveOccurred())
		for _, u := range objs {
			namespaced, err := env.Client.IsObjectNamespaced(u)
			g.Expect(err).NotTo(HaveOccurred())
			if namespaced && u.GetNamespace() == "" {
				u.SetNamespace("default")
			}
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(u), u)).To(Succeed())
			objects[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	g.Expect(objects).NotTo(BeEmpty())
	return objects
}
