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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// upgradeThroughCatalog publishes a next release in the catalog and lets OLM upgrade the Subscription to it: the
// custom resources stay (same objects, status kept), the new manager runs from the new CSV's Deployment with the
// certificate the new webhook configurations trust, and it reconciles a change made after the upgrade.
func upgradeThroughCatalog(t *testing.T, opm string, catalog *offlineCatalog, sub *operatorsv1alpha1.Subscription, m *asinstalled.Manager) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	before := sampleUIDs(g)

	nextDir := t.TempDir()
	next, err := catalog.withNextRelease(opm, nextDir, "0.1.1")
	g.Expect(err).NotTo(HaveOccurred())
	nextAddr := serveCatalog(t, "opm-serve-next", opm, nextDir)
	// The catalog now served at a new address: as when a CatalogSource's image is updated to a new catalog.
	source := &operatorsv1alpha1.CatalogSource{}
	g.Expect(olmClient.Get(ctx, types.NamespacedName{Namespace: sub.Spec.CatalogSourceNamespace, Name: sub.Spec.CatalogSource}, source)).To(Succeed())
	patch := client.MergeFrom(source.DeepCopy())
	source.Spec.Address = nextAddr
	g.Expect(olmClient.Patch(ctx, source, patch)).To(Succeed())

	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	g.Eventually(func(g Gomega) {
		g.Expect(olmClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
		g.Expect(sub.Status.InstalledCSV).To(Equal(next), "subscription: %s", sub.Status.State)
		g.Expect(olmClient.Get(ctx, types.NamespacedName{Namespace: installNamespace, Name: next}, csv)).To(Succeed())
		g.Expect(csv.Status.Phase).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded), "CSV %s: %s", csv.Status.Reason, csv.Status.Message)
		err := olmClient.Get(ctx, types.NamespacedName{Namespace: installNamespace, Name: catalog.bundleName}, &operatorsv1alpha1.ClusterServiceVersion{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the replaced CSV %s is removed", catalog.bundleName)
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: installNamespace, Name: deploymentName}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Annotations).To(HaveKeyWithValue("quartet.dev/release", "0.1.1"), "the Deployment is the new CSV's")
	g.Eventually(func(g Gomega) { webhooksTrustServingCert(g, csv) }).WithTimeout(time.Minute).Should(Succeed())

	// The pod of the old release goes; the new one runs as the new Deployment says.
	m.Restart(t, "manager-next")
	m.ApplySamples(t)
	m.WaitConverged(t)
	g.Expect(sampleUIDs(g)).To(Equal(before), "every custom resource is the same object after the upgrade")

	// A change after the upgrade is reconciled by the new manager: a new device in the inventory becomes a Target.
	inventory := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "device-inventory"}, inventory)).To(Succeed())
	inventory.Data["devices.yaml"] += "- {hostname: leaf9, mgmt_ip: 192.0.2.19, site: ams}\n"
	g.Expect(env.Client.Update(ctx, inventory)).To(Succeed())
	g.Eventually(func(g Gomega) {
		targets := &gnmicv1alpha1.TargetList{}
		g.Expect(env.Client.List(ctx, targets, client.InNamespace("default"))).To(Succeed())
		var names []string
		for _, tg := range targets.Items {
			names = append(names, tg.Name)
		}
		g.Expect(names).To(ContainElement(ContainSubstring("leaf9")))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	m.AssertNothingForbidden(t)
}

// sampleUIDs maps each object of config/samples to its UID.
func sampleUIDs(g Gomega) map[string]types.UID {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	uids := map[string]types.UID{}
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
			uids[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u.GetUID()
		}
	}
	g.Expect(uids).NotTo(BeEmpty())
	return uids
}
