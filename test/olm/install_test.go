package olm

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
	"github.com/quartet-dev/quartet-operator/internal/testenv/olminstall"
)

// TestInstallFromCatalogAndRunAsInstalled is one user's journey, in order: OLM installs the bundle from the offline
// catalog with the Subscription of docs/install.md on a plane without the Prometheus Operator's CRDs, then the
// manager runs as OLM installed it; then those CRDs appear, the manager's ServiceMonitor is scraped as it says, and
// the upgrade installs the next CSV with them served.
func TestInstallFromCatalogAndRunAsInstalled(t *testing.T) {
	g := NewWithT(t)
	var err error
	olmClient, err = olminstall.NewClient(env.Config)
	g.Expect(err).NotTo(HaveOccurred())

	opm, err := olminstall.OPM()
	g.Expect(err).NotTo(HaveOccurred())
	sub, catalog := installFromCatalog(t, opm)
	assertInstalled(t, sub)
	m := runAsInstalled(t)
	refreshThroughItsService(t, m)
	monitoringOnceItsCRDsAppear(t, sub, m)
	upgradeThroughCatalog(t, opm, catalog, sub, m)
}

// installFromCatalog starts OLM and opm, and subscribes to the package; it returns the Subscription once its
// InstallPlan is Complete and the CSV Succeeded.
func installFromCatalog(t *testing.T, opm string) (*operatorsv1alpha1.Subscription, *olminstall.Catalog) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()

	// The control plane serves no monitoring.coreos.com API, so a bundle object of those kinds would fail the
	// InstallPlan.
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = dc.ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Prometheus Operator's API is not served: %v", err)

	catalog, err := olminstall.RenderOfflineCatalog(opm, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	// Both properties make the install offline: no image to pull, every object inline.
	g.Expect(catalog.BundleImage).To(BeEmpty(), "the offline catalog's bundle has no image reference")
	g.Expect(catalog.BundleObjects).To(BeNumerically(">", 20), "the bundle's objects are inline (CRDs, CSV, RBAC, Services)")

	catalogAddr := olminstall.ServeCatalog(t, env, "opm-serve", opm, catalog.Dir)
	ops := olminstall.StartOperators(t, env, olmDir)
	// The objects of docs/install.md, with the catalog served locally instead of from its image.
	sub := subscriptionFromDocs(t)
	olminstall.Subscribe(t, olmClient, ops, catalogAddr, catalog.BundleName, sub)

	// No bundle was unpacked by a Job: the objects came inline from the catalog. OLM runs unpack Jobs in the
	// CatalogSource's namespace, not the install namespace, so look in every namespace.
	jobs := &metav1.PartialObjectMetadataList{}
	jobs.SetGroupVersionKind(schemaJobList)
	g.Expect(env.Client.List(ctx, jobs)).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no unpack Job in any namespace")
	return sub, catalog
}

// assertInstalled checks what OLM created: the ServiceAccount, the CSV's roles and bindings, webhook
// configurations whose CA bundle verifies the serving certificate OLM generated, and the Deployment with that
// certificate mounted and the Subscription's environment applied.
func assertInstalled(t *testing.T, sub *operatorsv1alpha1.Subscription) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	g.Expect(olmClient.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: sub.Status.InstalledCSV}, csv)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: serviceAccount}, &corev1.ServiceAccount{})).To(Succeed())

	// Every rule of the CSV is granted to the ServiceAccount through a binding OLM created.
	owned := client.MatchingLabels{"olm.owner": csv.Name, "olm.owner.namespace": installNamespace}
	roles, crs := &rbacv1.RoleList{}, &rbacv1.ClusterRoleList{}
	g.Expect(env.Client.List(ctx, roles, client.InNamespace(installNamespace), owned)).To(Succeed())
	g.Expect(env.Client.List(ctx, crs, owned)).To(Succeed())
	g.Expect(roles.Items).NotTo(BeEmpty(), "the CSV's namespaced permissions")
	g.Expect(crs.Items).NotTo(BeEmpty(), "the CSV's cluster permissions")
	bindings, crbs := &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleBindingList{}
	g.Expect(env.Client.List(ctx, bindings, client.InNamespace(installNamespace), owned)).To(Succeed())
	g.Expect(env.Client.List(ctx, crbs, owned)).To(Succeed())
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: serviceAccount, Namespace: installNamespace}
	for _, b := range bindings.Items {
		g.Expect(b.Subjects).To(ContainElement(subject), "RoleBinding %s", b.Name)
	}
	for _, b := range crbs.Items {
		g.Expect(b.Subjects).To(ContainElement(subject), "ClusterRoleBinding %s", b.Name)
	}
	var wantRules, gotRules int
	for _, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		wantRules += len(p.Rules)
	}
	for _, cr := range crs.Items {
		gotRules += len(cr.Rules)
	}
	g.Expect(gotRules).To(BeNumerically(">=", wantRules), "every cluster rule of the CSV is in a ClusterRole")

	var certSecret *corev1.Secret
	g.Eventually(func(g Gomega) { certSecret = webhooksTrustServingCert(g, csv) }).WithTimeout(time.Minute).Should(Succeed())

	// The Deployment: the certificate mounted where the manager reads it, the Subscription's env applied.
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: deploymentName}, dep)).To(Succeed())
	manager := asinstalled.ManagerContainer(dep)
	g.Expect(manager).NotTo(BeNil())
	g.Expect(manager.VolumeMounts).To(ContainElement(And(
		HaveField("MountPath", "/tmp/k8s-webhook-server/serving-certs"))))
	var certVolume bool
	for _, v := range dep.Spec.Template.Spec.Volumes {
		certVolume = certVolume || (v.Secret != nil && v.Secret.SecretName == certSecret.Name)
	}
	g.Expect(certVolume).To(BeTrue(), "the serving certificate Secret is a volume of the manager pod")
	for _, e := range sub.Spec.Config.Env {
		g.Expect(manager.Env).To(ContainElement(e), "the Subscription's env %s is in the Deployment", e.Name)
	}
}

// webhooksTrustServingCert checks that the serving certificate OLM generated is valid for the webhook Service's
// name and that every webhook configuration OLM created for csv carries a CA bundle that verifies it; it returns
// the certificate's Secret. OLM writes the Secret and the bundles after the CSV succeeds, and again on an upgrade
// (the replaced CSV's Secret goes with it), so callers poll it.
func webhooksTrustServingCert(g Gomega, csv *operatorsv1alpha1.ClusterServiceVersion) *corev1.Secret {
	ctx := context.Background()
	owned := client.MatchingLabels{"olm.owner": csv.Name, "olm.owner.namespace": installNamespace}
	certSecret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: deploymentName + "-service-cert"}, certSecret)).To(Succeed())
	block, _ := pem.Decode(certSecret.Data[corev1.TLSCertKey])
	g.Expect(block).NotTo(BeNil(), "tls.crt of the serving certificate")
	serving, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	serviceHost := fmt.Sprintf("%s-service.%s.svc", deploymentName, installNamespace)
	g.Expect(serving.VerifyHostname(serviceHost)).To(Succeed())

	verifies := func(caBundle []byte, what string) {
		pool := x509.NewCertPool()
		g.Expect(pool.AppendCertsFromPEM(caBundle)).To(BeTrue(), "%s has a CA bundle", what)
		_, err := serving.Verify(x509.VerifyOptions{Roots: pool, DNSName: serviceHost})
		g.Expect(err).NotTo(HaveOccurred(), "%s's CA bundle verifies the serving certificate", what)
	}
	validating, mutating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}, &admissionregistrationv1.MutatingWebhookConfigurationList{}
	g.Expect(env.Client.List(ctx, validating, owned)).To(Succeed())
	g.Expect(env.Client.List(ctx, mutating, owned)).To(Succeed())
	var made int
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			verifies(w.ClientConfig.CABundle, "validating webhook "+w.Name)
			g.Expect(w.ClientConfig.Service.Name).To(Equal(deploymentName + "-service"))
			made++
		}
	}
	for _, c := range mutating.Items {
		for _, w := range c.Webhooks {
			verifies(w.ClientConfig.CABundle, "mutating webhook "+w.Name)
			made++
		}
	}
	g.Expect(made).To(Equal(len(csv.Spec.WebhookDefinitions)), "one webhook per webhook definition")

	return certSecret
}
