package realnode

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
	"github.com/quartet-dev/quartet-operator/internal/testenv/images"
	"github.com/quartet-dev/quartet-operator/internal/testenv/olminstall"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// TestOperatorPodInstalledByOLMRunsOnTheRealNode is the install of docs/install.md on a tainted node pool: OLM
// installs the bundle from the offline catalog with a Subscription whose config adds the pool's toleration and
// nodeSelector, and the CSV's Deployment runs the operator image (built offline, tagged with the exact reference
// the CSV names, imported into the node's containerd) as a real container. Its pod must turn Ready through the
// kubelet's probes as the CSV locks it down (non-root, read-only root filesystem), serve the webhooks through
// OLM's Service and certificate, and reconcile a sample from inside the pod.
func TestOperatorPodInstalledByOLMRunsOnTheRealNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opm, err := olminstall.OPM()
	g.Expect(err).NotTo(HaveOccurred())
	olmClient, err := olminstall.NewClient(env.Config)
	g.Expect(err).NotTo(HaveOccurred())

	catalog, err := olminstall.RenderOfflineCatalog(opm, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	bundled, err := catalog.CSV()
	g.Expect(err).NotTo(HaveOccurred())
	started := time.Now()
	refs := operatorImageRefs(t, bundled)
	archive, err := images.WriteOperatorArchive(ctx, t.TempDir(), refs...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.ImportImages(ctx, archive)).To(Succeed())
	t.Logf("operator image %v built offline and imported in %s", refs, time.Since(started).Round(time.Second))

	// One manager per object: the in-process controllers (gnmicpods_test.go) stop while the operator's pod runs,
	// and start again once it is uninstalled (cleanups run last-registered first).
	g.Expect(env.StopManager()).To(Succeed())
	t.Cleanup(func() {
		if err := env.StartManager(); err != nil {
			t.Errorf("restarting the in-process controllers: %v", err)
		}
	})

	catalogAddr := olminstall.ServeCatalog(t, env, "opm-serve", opm, catalog.Dir)
	ops := olminstall.StartOperators(t, env, olmDir)
	sub := tolerantSubscription()
	t.Cleanup(func() { uninstall(t, olmClient, catalog.BundleName) })
	// Whatever step fails (the CSV waits for the pod too), print the pod's status and log before the uninstall.
	t.Cleanup(func() {
		if t.Failed() {
			printOperatorLogs(t)
		}
	})
	started = time.Now()
	csv := olminstall.Subscribe(t, olmClient, ops, catalogAddr, catalog.BundleName, sub)
	t.Logf("CSV %s Succeeded %s after subscribing", csv.Name, time.Since(started).Round(time.Second))

	pod := operatorPodReady(t)
	t.Logf("operator pod %s Ready on %s %s after subscribing", pod.Name, pod.Spec.NodeName, time.Since(started).Round(time.Second))
	webhooksServedFromThePod(t, csv)
	reconcilesFromThePod(t)

	// Still the same container: the liveness probe never failed while the webhooks and the reconciler worked.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(HaveField("Ready", true), HaveField("RestartCount", BeZero()))))
	// The manager's log, as the kubelet serves it through the API server (what a failure prints).
	log, err := podLog(ctx, pod, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(log).To(ContainSubstring("Starting workers"))
}

// podLog is the manager container's log (its previous run's with previous), read through pods/log: the API
// server fetches it from the kubelet.
func podLog(ctx context.Context, pod *corev1.Pod, previous bool) (string, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	data, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "manager", Previous: previous}).DoRaw(ctx)
	return string(data), err
}

// operatorImageRefs are the image references of the bundle's CSV that name the operator image: the manager
// container's and the RELATED_IMAGE variables that point at the same repository (katastroma ships in it).
func operatorImageRefs(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) []string {
	t.Helper()
	g := NewWithT(t)
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	g.Expect(deployments).To(HaveLen(1))
	dep := appsv1.Deployment{Spec: deployments[0].Spec}
	manager := asinstalled.ManagerContainer(&dep)
	g.Expect(manager).NotTo(BeNil(), "the CSV's Deployment has a manager container")
	refs := []string{manager.Image}
	for _, e := range manager.Env {
		if e.Name == "RELATED_IMAGE_KATASTROMA" {
			g.Expect(e.Value).To(Equal(manager.Image), "katastroma's related image is the operator image")
		}
	}
	g.Expect(csv.Spec.RelatedImages).To(ContainElement(HaveField("Image", manager.Image)))
	return refs
}

// tolerantSubscription subscribes to the package as a user whose node pool is tainted: spec.config adds the
// pool's toleration and nodeSelector to the operator's pod (OLM merges them into the CSV's Deployment).
func tolerantSubscription() *operatorsv1alpha1.Subscription {
	return &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: olminstall.Namespace, Name: olminstall.PackageName},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource: olminstall.PackageName, CatalogSourceNamespace: olminstall.OLMNamespace,
			Package: olminstall.PackageName, Channel: olminstall.ChannelName,
			InstallPlanApproval: operatorsv1alpha1.ApprovalAutomatic,
			Config: &operatorsv1alpha1.SubscriptionConfig{
				NodeSelector: map[string]string{realnode.NodeLabel: "true"},
				Tolerations: []corev1.Toleration{{Key: realnode.Taint, Operator: corev1.TolerationOpExists,
					Effect: corev1.TaintEffectNoSchedule}},
			},
		},
	}
}

// operatorPodReady waits until the operator's Deployment has its pod Running and Ready on the real node, as the
// CSV locks it down.
func operatorPodReady(t *testing.T) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(olminstall.Namespace),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "one operator pod")
		pod = &pods.Items[0]
		g.Expect(pod.Spec.NodeName).To(Equal(node.Name), "scheduled on the real node")
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "pod status: %+v", pod.Status)
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", pod.Status)
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

	// The lock-down the kubelet enforced is the CSV's, not one the test added.
	g.Expect(pod.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	manager := pod.Spec.Containers[0]
	g.Expect(manager.Name).To(Equal("manager"))
	g.Expect(manager.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(manager.ReadinessProbe).NotTo(BeNil())
	g.Expect(manager.LivenessProbe).NotTo(BeNil())
	g.Expect(pod.Status.PodIP).To(HavePrefix("10.245.0."), "an address on the node's bridge")
	return pod
}

// printOperatorLogs prints the operator pod's status and its manager container's log, as the kubelet serves it.
func printOperatorLogs(t *testing.T) {
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(olminstall.Namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		t.Logf("operator pods: %v", err)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		t.Logf("operator pod %s on %q: phase %s, conditions %+v, containers %+v", p.Name, p.Spec.NodeName, p.Status.Phase,
			p.Status.Conditions, p.Status.ContainerStatuses)
		for _, previous := range []bool{true, false} {
			log, err := podLog(ctx, p, previous)
			t.Logf("--- log of %s (previous=%t, err=%v):\n%s", p.Name, previous, err, log)
		}
	}
}

// webhooksServedFromThePod checks the webhook configurations OLM made call its Service, and that the pod behind
// it answers: a TargetProfile only the validating webhook refuses (the CRD's schema admits any duration) is
// refused with the webhook's message naming the field, and the sample TargetProfile is admitted.
func webhooksServedFromThePod(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(env.Client.List(ctx, validating, client.MatchingLabels{"olm.owner": csv.Name})).To(Succeed())
	g.Expect(validating.Items).NotTo(BeEmpty())
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			g.Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
			g.Expect(w.ClientConfig.Service.Name).To(Equal(olminstall.WebhookService), w.Name)
		}
	}
	ns := namespace(t, "realnode-olm")
	tooEager := &gnmicv1alpha1.TargetProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-eager"},
		Spec:       gnmicv1alpha1.TargetProfileSpec{RetryTimer: &metav1.Duration{Duration: time.Second}},
	}
	// The Service's endpoint appears once the pod is Ready; kube-proxy may take a moment to route it.
	g.Eventually(func() error { return env.Client.Create(ctx, tooEager.DeepCopy()) }).WithTimeout(time.Minute).
		Should(MatchError(And(ContainSubstring("spec.retryTimer"), ContainSubstring("must be at least 2s"))))
}

// reconcilesFromThePod applies the sample TargetProfile (it needs no peer) and waits until the manager in the pod
// has marked it Ready.
func reconcilesFromThePod(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "realnode-sample")
	objs, err := testenv.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "samples", "gnmic_v1alpha1_targetprofile.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	sample := objs[0]
	sample.SetNamespace(ns)
	g.Expect(env.Client.Create(ctx, sample)).To(Succeed(), "the valid sample is admitted by the webhook")
	profile := &gnmicv1alpha1.TargetProfile{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sample), profile)).To(Succeed())
		g.Expect(profile.Status.Conditions).To(ContainElement(And(
			HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))), "status: %+v", profile.Status)
		g.Expect(profile.Status.ObservedGeneration).To(Equal(profile.Generation))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// uninstall removes what the install left that would outlive the test: the webhook configurations that call the
// operator's pod, and the install namespace (with the CSV, its Deployment and pod). The operator's CRDs stay, as
// the plane started with them. It waits (two minutes at most) until the operator's pod is gone.
func uninstall(t *testing.T, olmClient client.Client, csvName string) {
	ctx := context.Background()
	owned := client.MatchingLabels{"olm.owner": csvName}
	for _, err := range []error{
		olmClient.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}, owned),
		olmClient.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}, owned),
		olmClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olminstall.Namespace}}),
	} {
		if client.IgnoreNotFound(err) != nil {
			t.Errorf("uninstalling the operator: %v", err)
		}
	}
	// The operator's pod must be gone before another manager (or a later test's objects) meets it.
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(env.Client.List(ctx, &pods, client.InNamespace(olminstall.Namespace))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "the operator's pods after the uninstall")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}
