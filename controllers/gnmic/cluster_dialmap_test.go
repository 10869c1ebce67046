package gnmic_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// The operator pushes to the collector's real in-cluster URL
// (http://gnmic-solo-0.gnmic-solo.<ns>.svc.cluster.local:<restPort>); QUARTET_DEV_DIAL_MAP, set in TestMain,
// sends every *.svc.cluster.local connection to loopback on the same port, where the collector test server
// listens. Nothing on the Cluster points anywhere else.
func TestClusterReachesItsCollectorThroughTheDialMap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	server := collectors(t, 1)[0]
	u, err := url.Parse(server.URL())
	g.Expect(err).NotTo(HaveOccurred())
	port, err := strconv.Atoi(u.Port())
	g.Expect(err).NotTo(HaveOccurred())
	names := fleet(g, ns, 3)
	replicas := int32(1)
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.45.0", Replicas: &replicas,
			API: &gnmicv1alpha1.ClusterAPI{RestPort: int32(port), PlainHTTP: true}}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "solo-telemetry", "solo"))).To(Succeed())

	g.Eventually(server.TargetNames).Should(Equal(names))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		applied := meta.FindStatusCondition(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)
		g.Expect(applied).NotTo(BeNil())
		g.Expect(applied.Status).To(Equal(metav1.ConditionTrue), applied.Message)
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, gnmicv1alpha1.ClusterConditionReady)).To(BeTrue())
	}).Should(Succeed())
}
