package gnmic_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

func clusterCondition(g Gomega, c *gnmicv1alpha1.Cluster, typ string) *metav1.Condition {
	got := &gnmicv1alpha1.Cluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got)).To(Succeed())
	cond := meta.FindStatusCondition(got.Status.Conditions, typ)
	g.Expect(cond).NotTo(BeNil(), typ)
	return cond
}

// Deleting (or renaming) a TargetProfile's CA ConfigMap keeps its targets collected with the last good file,
// which stays in the target-tls Secret; TargetTLSReady says so. A new ConfigMap is used as any rotation.
func TestClusterKeepsLastGoodTLSWhenTheCAConfigMapIsDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	names := fleet(g, ns, 2)
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "device-ca"}, Data: map[string]string{"ca.crt": "CA-1"}}
	g.Expect(env.Client.Create(ctx, ca)).To(Succeed())
	profile := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	g.Expect(env.Client.Patch(ctx, profile, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"tls":{"caBundle":{"configMapRef":{"name":"device-ca"}}}}}`)))).To(Succeed())
	c := cluster(g, ns, "lastgood", 1, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "lastgood"))).To(Succeed())
	ca1 := plan.TargetTLSDir + "/" + plan.TargetTLSKey(ns, "default", plan.TargetTLSCA, []byte("CA-1"))
	collectedWith := func(g Gomega, caFile string) {
		g.Expect(servers[0].TargetNames()).To(Equal(names))
		for _, cfg := range servers[0].Config().Targets {
			g.Expect(cfg.TLSCA).To(HaveValue(Equal(caFile)))
		}
	}
	g.Eventually(func(g Gomega) { collectedWith(g, ca1) }).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, ca)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cond := clusterCondition(g, c, gnmicv1alpha1.ClusterConditionTargetTLSReady)
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonTargetTLSLastGood))
		g.Expect(cond.Message).To(ContainSubstring("ConfigMap/device-ca"))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) { collectedWith(g, ca1) }).WithTimeout(3 * time.Second).Should(Succeed())

	ca = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "device-ca"}, Data: map[string]string{"ca.crt": "CA-2"}}
	g.Expect(env.Client.Create(ctx, ca)).To(Succeed())
	ca2 := plan.TargetTLSDir + "/" + plan.TargetTLSKey(ns, "default", plan.TargetTLSCA, []byte("CA-2"))
	g.Eventually(func(g Gomega) {
		collectedWith(g, ca2)
		g.Expect(clusterCondition(g, c, gnmicv1alpha1.ClusterConditionTargetTLSReady).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(targetTLSPropagation + 30*time.Second).Should(Succeed())
}

// A TargetProfile whose credentials Secret is missing has its targets held back (left out of the push, reported
// by CredentialsMissing), never pushed without credentials; they come back with the Secret.
func TestClusterHoldsBackTargetsWithoutTheirCredentialsSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := fleet(g, ns, 2)
	servers := secureCluster(t, g, ns, "nocreds", 1)
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nocreds"}}
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "nocreds"))).To(Succeed())
	g.Eventually(servers[0].TargetNames).WithTimeout(30 * time.Second).Should(Equal(names))

	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}}
	g.Expect(env.Client.Delete(ctx, creds)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(servers[0].TargetNames()).To(BeEmpty())
		cond := clusterCondition(g, c, gnmicv1alpha1.ClusterConditionCredentialsMissing)
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Message).To(ContainSubstring("Secret/creds"))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	for _, a := range servers[0].Applies() {
		for name, cfg := range a.Targets {
			g.Expect(cfg.Password).NotTo(BeNil(), "%s was pushed without credentials", name)
		}
	}

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"username": "admin", "password": "again"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(servers[0].TargetNames()).To(Equal(names))
		for _, cfg := range servers[0].Config().Targets {
			g.Expect(cfg.Password).To(HaveValue(Equal("again")))
		}
		g.Expect(meta.FindStatusCondition(func() []metav1.Condition {
			got := &gnmicv1alpha1.Cluster{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
			return got.Status.Conditions
		}(), gnmicv1alpha1.ClusterConditionCredentialsMissing)).To(BeNil())
	}).WithTimeout(20 * time.Second).Should(Succeed())
}
