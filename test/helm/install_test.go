package helm

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/guard"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// TestInstallUpgradeUninstall installs the chart as `helm install` does (CRDs from crds/, then the templates by
// server-side apply), runs the manager as installed until the samples reach their steady state, upgrades the
// release to a changed values set, and uninstalls it: afterwards no cluster-scoped object of the release may
// remain but its CRDs, which Helm never deletes.
func TestInstallUpgradeUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	before := clusterScopedObjects(t)
	// As on a cluster that has neither cert-manager nor the Prometheus Operator: the default install needs neither.
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	groups, err := dc.ServerGroups()
	g.Expect(err).NotTo(HaveOccurred())
	for _, group := range groups.Groups {
		g.Expect(group.Name).NotTo(BeElementOf("cert-manager.io", "monitoring.coreos.com"), "the plane serves no %s", group.Name)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	// The default certificate source: the manager generates its webhook certificate itself, no cert-manager, no
	// Secret made beforehand.
	vals := map[string]any{
		"webhook": map[string]any{"certificates": map[string]any{"secretName": installed.CertSecret}},
		// The Fleet group's credentials; asinstalled.Run serves a local Fleet API behind this Secret. A registry
		// writer outside the operator, for the HTTPS write below.
		"config": map[string]any{"fleet-credentials-secret": releaseNamespace + "/fleet-credentials",
			"registry-writers": "default/registry-writer"},
	}

	cfg := helmConfiguration(t)
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = releaseName, releaseNamespace
	install.WaitStrategy = kube.HookOnlyStrategy
	_, err = install.RunWithContext(ctx, loadChart(t), vals)
	g.Expect(err).NotTo(HaveOccurred())

	for _, crd := range chartCRDs(t) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy())).To(Succeed(), crd.GetName())
	}
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "quartet-operator-controller-manager"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(dep.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", releaseName))
	vwc := &unstructured.Unstructured{}
	vwc.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"})
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "quartet-operator-validating-webhook-configuration"}, vwc)).To(Succeed())

	// The manager as the chart installed it: its ServiceAccount's token, the Secret's certificate, the Deployment's
	// arguments and environment; the samples reach their steady state and no request is forbidden.
	m := asinstalled.Run(t, env, installed)
	// A writer outside the operator registers an agent over HTTPS, trusting only the CA the manager published: the
	// registry serves TLS with the certificate it issued itself, no cert-manager involved.
	m.WriteRegistryOverTLS(t, "default", "registry-writer")
	metricsScrapedWithTheScraperToken(t, m)
	// The samples went through the webhooks, so the API server trusted the certificate the manager generated: the
	// caBundle it patched is the CA of the Secret it keeps.
	certSecret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: installed.CertSecret}, certSecret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
	webhooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	g.Expect(webhooks).NotTo(BeEmpty())
	for _, w := range webhooks {
		caBundle, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "caBundle")
		g.Expect(caBundle).To(Equal(base64.StdEncoding.EncodeToString(certSecret.Data["ca.crt"])))
	}
	// A re-apply of the chart's configuration (Argo CD, kubectl apply) empties caBundle; the running manager puts
	// it back within a minute.
	for _, w := range webhooks {
		unstructured.RemoveNestedField(w.(map[string]any), "clientConfig", "caBundle")
	}
	g.Expect(unstructured.SetNestedSlice(vwc.Object, webhooks, "webhooks")).To(Succeed())
	g.Expect(env.Client.Update(ctx, vwc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		webhooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		for _, w := range webhooks {
			caBundle, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "caBundle")
			g.Expect(caBundle).To(Equal(base64.StdEncoding.EncodeToString(certSecret.Data["ca.crt"])))
		}
	}, time.Minute, time.Second).Should(Succeed(), "the emptied caBundle is repaired")

	// A changed values set: more replicas, a manager setting, fewer groups, the network policies. The groups
	// dropped lose their rights with the upgrade, so their custom resources go first, while the manager still runs
	// their finalizers (docs/install.md, Helm).
	deleteCustomResources(t, "agentrax.io", "katastroma.org")
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = releaseNamespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	changed := map[string]any{
		"replicaCount":  2,
		"config":        map[string]any{"log-level": "debug", "fleet-credentials-secret": releaseNamespace + "/fleet-credentials"},
		"groups":        []any{"gnmic", "fleet"},
		"networkPolicy": map[string]any{"enabled": true},
	}
	// Switching to the "secret" source keeps the certificate the manager made: the Secret stays, its CA becomes
	// the chart's caBundle.
	changed["webhook"] = map[string]any{"certificates": map[string]any{
		"source": "secret", "secretName": installed.CertSecret,
		"caBundle": base64.StdEncoding.EncodeToString(certSecret.Data["ca.crt"]),
	}}
	_, err = upgrade.RunWithContext(ctx, releaseName, loadChart(t), changed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
	g.Expect(dep.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
	manager := dep.Spec.Template.Spec.Containers[0]
	g.Expect(manager.Env).To(ContainElement(corev1.EnvVar{Name: "QUARTET_LOG_LEVEL", Value: "debug"}))
	g.Expect(manager.Args).To(ContainElement("--groups=gnmic,fleet"))
	policies := &unstructured.UnstructuredList{}
	policies.SetGroupVersionKind(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicyList"})
	g.Expect(env.Client.List(ctx, policies, client.InNamespace(releaseNamespace))).To(Succeed())
	g.Expect(policies.Items).To(HaveLen(4), "metrics, webhooks, the MCP registry and the refresh API")
	// The dropped groups' ClusterRoles are gone, and the manager as upgraded runs the others with what remains.
	for _, group := range []string{"agentrax", "gitops"} {
		err := env.Client.Get(ctx, client.ObjectKey{Name: "quartet-operator-manager-role-" + group}, &rbacv1.ClusterRole{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", group, err)
	}
	m.Restart(t, "upgraded")

	// The documented uninstall: the custom resources first, while the manager runs their finalizers.
	deleteCustomResources(t)
	// Finalizers act with the manager's permissions too (e.g. the gitops Platform's DeleteAllOf of its
	// ClusterRoleBindings needs deletecollection).
	_, forbidden, err := asinstalled.AuditedAnswers(env.Cluster.AuditLogPath(), installed.User())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(forbidden).To(BeEmpty(), "requests of %s answered 403 Forbidden while its finalizers ran", installed.User())
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	_, err = uninstall.Run(releaseName)
	g.Expect(err).NotTo(HaveOccurred())
	// The documented step after an uninstall: what the operator may create but never delete (its guard), and the
	// aggregated tenant roles the aggregation controller may have applied again while Helm deleted them.
	policy, binding := guard.Policy(guard.Options{})
	tenantPolicy, tenantBinding := guard.TenantPolicy()
	for _, obj := range []client.Object{binding, policy, tenantBinding, tenantPolicy,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: platform.TenantProvisionerClusterRole}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: platform.TenantPrunerClusterRole}}} {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(Succeed())
	}
	// What stays by design: the CRDs, the APIServices the API server registers for their groups, and the
	// namespace, which the test created (as `helm install --create-namespace` would, outside the release).
	kept := []string{"namespaces./" + releaseNamespace}
	for _, crd := range chartCRDs(t) {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			kept = append(kept, "apiservices.apiregistration.k8s.io/"+v.(map[string]any)["name"].(string)+"."+group)
		}
	}
	g.Eventually(func(g Gomega) {
		var leftovers []string
		for _, o := range clusterScopedObjects(t) {
			if !slices.Contains(before, o) && !isCRD(o) && !slices.Contains(kept, o) {
				leftovers = append(leftovers, o)
			}
		}
		g.Expect(leftovers).To(BeEmpty())
	}).Should(Succeed())
	g.Expect(env.Client.List(ctx, policies, client.InNamespace(releaseNamespace))).To(Succeed())
	g.Expect(policies.Items).To(BeEmpty())
}

// deleteCustomResources deletes every object of the chart's kinds (of the given API groups only, when any are
// given), in every namespace, and waits until they are gone.
func deleteCustomResources(t *testing.T, groups ...string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	var resources []schema.GroupVersionResource
	for _, crd := range chartCRDs(t) {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		if len(groups) > 0 && !slices.Contains(groups, group) {
			continue
		}
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		resources = append(resources, schema.GroupVersionResource{Group: group, Resource: plural,
			Version: versions[0].(map[string]any)["name"].(string)})
	}
	for _, r := range resources {
		items, err := dyn.Resource(r).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items.Items {
			err := dyn.Resource(r).Namespace(item.GetNamespace()).Delete(ctx, item.GetName(), metav1.DeleteOptions{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		}
	}
	g.Eventually(func(g Gomega) {
		for _, r := range resources {
			items, err := dyn.Resource(r).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(items.Items).To(BeEmpty(), r.String())
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

func isCRD(o string) bool {
	return strings.HasPrefix(o, "customresourcedefinitions.apiextensions.k8s.io/")
}

// clusterScopedObjects lists every cluster-scoped object the API server can list, as resource.group/name.
func clusterScopedObjects(t *testing.T) []string {
	t.Helper()
	g := NewWithT(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	dyn, err := dynamic.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	lists, err := dc.ServerPreferredResources()
	g.Expect(err).NotTo(HaveOccurred())
	var objects []string
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		g.Expect(err).NotTo(HaveOccurred())
		for _, r := range list.APIResources {
			// ComponentStatus is deprecated (and warns); the chart has none.
			if r.Namespaced || !slices.Contains(r.Verbs, "list") || r.Name == "componentstatuses" {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred(), r.Name)
			for _, item := range items.Items {
				objects = append(objects, r.Name+"."+gv.Group+"/"+item.GetName())
			}
		}
	}
	return objects
}

// helmConfiguration is the Helm SDK's configuration for the control plane, as a cluster administrator with a
// kubeconfig file (what `helm` reads), storing releases as Secrets in the release namespace.
func helmConfiguration(t *testing.T) *action.Configuration {
	t.Helper()
	g := NewWithT(t)
	kubeconfig, err := env.AddAdminKubeconfig("helm-admin")
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &path
	ns := releaseNamespace
	flags.Namespace = &ns
	cfg := action.NewConfiguration()
	g.Expect(cfg.Init(flags, releaseNamespace, "secret")).To(Succeed())
	return cfg
}
