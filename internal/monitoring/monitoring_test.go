package monitoring_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quartet-dev/quartet-operator/internal/monitoring"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// env is a control plane without the Prometheus Operator's CRDs, as a cluster without it (OperatorHub.io's kind
// cluster) is.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{WithoutOperator: true, WithoutMonitoringCRDs: true}))
}

// TestObjectsAppearWithTheirCRDs: with no monitoring.coreos.com API the installer does nothing and reports no
// error; once the CRDs are installed (later, as an administrator adding the Prometheus Operator would), the next
// check creates every ServiceMonitor and PrometheusRule in the operator's namespace with the configured labels.
func TestObjectsAppearWithTheirCRDs(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operator-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	labels := map[string]string{"release": "kube-prometheus-stack"}
	inst := &monitoring.Installer{Client: env.Client, Discovery: dc, Namespace: ns.Name, Labels: labels,
		Interval: 500 * time.Millisecond}

	applied, err := inst.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "no Prometheus Operator is no error")
	g.Expect(applied).To(BeZero())

	go func() { _ = inst.Start(ctx) }()
	paths, err := testenv.ThirdPartyCRDPaths()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: slices.DeleteFunc(paths, func(p string) bool { return !testenv.IsMonitoringCRD(p) }), ErrorIfPathMissing: true})
	g.Expect(err).NotTo(HaveOccurred())

	// Render is Objects with the manager's ServiceMonitor verifying its Service's name in this namespace.
	want, err := monitoring.Render(ns.Name, labels, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, w := range want {
		kinds = append(kinds, w.GetKind())
	}
	g.Expect(kinds).To(ContainElements("ServiceMonitor", "PrometheusRule"))
	g.Eventually(func(g Gomega) {
		for _, w := range want {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(schema.FromAPIVersionAndKind(w.GetAPIVersion(), w.GetKind()))
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed(), w.GetName())
			g.Expect(got.GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
			g.Expect(got.Object["spec"]).To(Equal(w.Object["spec"]), w.GetName())
		}
	}, time.Minute, time.Second).Should(Succeed())
}
