package gnmic_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// A changed credentials Secret reaches the collectors holding the targets of the profiles that name it, without
// any other change (the Secret is watched through an index of TargetProfiles by the Secrets they reference).
// Before, the new password stayed unpushed until something else started a reconcile.
func TestClusterPushesChangedCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := fleet(g, ns, 6)
	servers := secureCluster(t, g, ns, "creds", 2)
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "creds"))).To(Succeed())
	g.Eventually(func(g Gomega) { expectServersHoldPlacement(g, ns, "creds", servers, names) }).Should(Succeed())

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "creds"}, secret)).To(Succeed())
	secret.Data["password"] = []byte("rotated")
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, s := range servers {
			for name, cfg := range s.Config().Targets {
				g.Expect(*cfg.Password).To(Equal("rotated"), "target %s", name)
			}
		}
	}).Should(Succeed())
}

// A TargetProfile's CA bundle (from a ConfigMap) and client certificate reach the collectors: gNMIc's target
// config names files under /etc/gnmic/target-tls, the Cluster's target-tls Secret holds them (each key named after
// a digest of its content) and is mounted there. A rotated CA bundle is pushed: once the new file has had the
// propagation time to reach the pods, the targets name it (a changed target, which gNMIc re-applies with the new
// file); until then they keep the old one, which stays in the Secret meanwhile, and nothing is held back.
func TestClusterTargetProfileTLSMaterial(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	fleet(g, ns, 2)
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "device-ca"},
		Data: map[string]string{"ca.crt": "CA-1"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}})).To(Succeed())
	// A merge patch: the TargetProfile controller writes the profile's status concurrently.
	profile := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	patch := []byte(`{"spec":{"tls":{"caBundle":{"configMapRef":{"name":"device-ca"}},"clientCertRef":{"name":"client"}}}}`)
	g.Expect(env.Client.Patch(ctx, profile, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	c := cluster(g, ns, "tls", 1, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "tls"))).To(Succeed())

	key := func(file, content string) string { return plan.TargetTLSKey(ns, "default", file, []byte(content)) }
	ca1, ca2 := key(plan.TargetTLSCA, "CA-1"), key(plan.TargetTLSCA, "CA-2")
	cert, privateKey := key(plan.TargetTLSCert, "CERT"), key(plan.TargetTLSPrivateKey, "KEY")
	targetsName := func(g Gomega, caKey string) {
		targets := servers[0].Config().Targets
		g.Expect(targets).To(HaveLen(2))
		for _, cfg := range targets {
			g.Expect(cfg.TLSCA).To(HaveValue(Equal(plan.TargetTLSDir + "/" + caKey)))
			g.Expect(cfg.TLSCert).To(HaveValue(Equal(plan.TargetTLSDir + "/" + cert)))
			g.Expect(cfg.TLSKey).To(HaveValue(Equal(plan.TargetTLSDir + "/" + privateKey)))
			g.Expect(cfg.Insecure).To(BeNil())
		}
	}
	g.Eventually(func(g Gomega) { targetsName(g, ca1) }).Should(Succeed())
	material := func(g Gomega) map[string][]byte {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tls-target-tls"}, s)).To(Succeed())
		return s.Data
	}
	g.Expect(material(g)).To(Equal(map[string][]byte{ca1: []byte("CA-1"), cert: []byte("CERT"), privateKey: []byte("KEY")}))
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tls"}, sts)).To(Succeed())
	g.Expect(sts.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/gnmic/target-tls")))

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "device-ca"}, cm)).To(Succeed())
	cm.Data["ca.crt"] = "CA-2"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	// The new file joins the Secret beside the old one, which the pushed targets still name until the new file has
	// had the propagation time (counted from when the operator added it, as the Secret records).
	g.Eventually(func(g Gomega) {
		g.Expect(material(g)).To(And(HaveKeyWithValue(ca2, []byte("CA-2")), HaveKeyWithValue(ca1, []byte("CA-1"))))
	}).Should(Succeed())
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tls-target-tls"}, s)).To(Succeed())
	added := map[string]int64{}
	g.Expect(json.Unmarshal([]byte(s.Annotations["operator.gnmic.dev/target-tls-added"]), &added)).To(Succeed())
	g.Expect(added).To(HaveKey(ca2))
	if due := time.Unix(added[ca2], 0).Add(targetTLSPropagation - time.Second); time.Now().Before(due) {
		targetsName(g, ca1)
	} else {
		t.Logf("the check of the old path was too late (the new file was due at %s)", due)
	}
	// Then the targets name the new file, the old one goes, and no target was held back on the way.
	g.Eventually(func(g Gomega) {
		targetsName(g, ca2)
		g.Expect(material(g)).NotTo(HaveKey(ca1))
	}).WithTimeout(targetTLSPropagation + time.Minute).Should(Succeed())
	got := &gnmicv1alpha1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.ClusterConditionTargetTLSReady)).To(BeTrue())

	// A rotation whose push fails keeps the file the collector's configuration still names: CA-3 is chosen once
	// propagated, the collector refuses the apply, and CA-2 stays in the Secret until a push naming CA-3 succeeds.
	ca3 := key(plan.TargetTLSCA, "CA-3")
	servers[0].SetFault(gnmicserver.Fault{Status: 503})
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "device-ca"}, cm)).To(Succeed())
	cm.Data["ca.crt"] = "CA-3"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-tls-target-tls"}, s)).To(Succeed())
		g.Expect(s.Annotations["operator.gnmic.dev/target-tls-in-use"]).To(ContainSubstring(ca3), "CA-3 chosen once propagated")
		g.Expect(s.Data).To(HaveKey(ca2), "the file the refused collector still names stays")
	}).WithTimeout(targetTLSPropagation + time.Minute).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(material(g)).To(HaveKey(ca2)) }, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	servers[0].SetFault(gnmicserver.Fault{})
	g.Eventually(func(g Gomega) {
		targetsName(g, ca3)
		g.Expect(material(g)).To(And(HaveKey(ca3), Not(HaveKey(ca2))))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// Only the pods whose targets use the changed Secret are called: with one target on two pods, the empty pod's
// configuration does not change and it receives no new apply.
func TestClusterCredentialsChangeReachesOnlyAffectedPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := fleet(g, ns, 1)
	servers := secureCluster(t, g, ns, "one", 2)
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "one"))).To(Succeed())
	g.Eventually(func(g Gomega) { expectServersHoldPlacement(g, ns, "one", servers, names) }).Should(Succeed())
	holder, idle := servers[0], servers[1]
	if len(holder.TargetNames()) == 0 {
		holder, idle = idle, holder
	}
	idleApplies := idle.ApplyCount()

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "creds"}, secret)).To(Succeed())
	secret.Data["password"] = []byte("rotated")
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, cfg := range holder.Config().Targets {
			g.Expect(*cfg.Password).To(Equal("rotated"))
		}
	}).Should(Succeed())
	g.Expect(idle.ApplyCount()).To(Equal(idleApplies))
}

// gNMIc v0.47 crashes (nil pointer in its subscribe path) when a subscription is applied to a target whose
// tls-ca, tls-cert or tls-key file does not exist, so such targets are held back: first because the CA bundle's
// ConfigMap is missing, then while the kubelet may not yet have written the newly added file into the pods
// (--gnmic-target-tls-propagation, targetTLSPropagation in these tests); after that they are pushed.
func TestClusterHoldsBackTargetsUntilTheirTLSFilesAreInThePods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	fleet(g, ns, 2)
	profile := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	patch := []byte(`{"spec":{"tls":{"caBundle":{"configMapRef":{"name":"device-ca"}}}}}`)
	g.Expect(env.Client.Patch(ctx, profile, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	c := cluster(g, ns, "held", 1, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "held"))).To(Succeed())

	tlsCondition := func(g Gomega) *metav1.Condition {
		got := &gnmicv1alpha1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)).To(BeTrue())
		cond := meta.FindStatusCondition(got.Status.Conditions, gnmicv1alpha1.ClusterConditionTargetTLSReady)
		g.Expect(cond).NotTo(BeNil())
		return cond
	}
	g.Eventually(func(g Gomega) {
		cond := tlsCondition(g)
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonTargetTLSHeldBack))
		g.Expect(cond.Message).To(ContainSubstring("TargetProfile/default: CA bundle ConfigMap/device-ca key ca.crt not found"))
	}).Should(Succeed())
	g.Expect(servers[0].Config().Targets).To(BeEmpty(), "a target whose CA file is missing would crash the collector")

	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "device-ca"},
		Data: map[string]string{"ca.crt": "CA-1"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(tlsCondition(g).Message).To(ContainSubstring("waiting up to " + targetTLSPropagation.String()))
	}).Should(Succeed())
	g.Expect(servers[0].Config().Targets).To(BeEmpty(), "the new CA file may not be in the pod yet")

	g.Eventually(func(g Gomega) {
		g.Expect(tlsCondition(g).Status).To(Equal(metav1.ConditionTrue))
		targets := servers[0].Config().Targets
		g.Expect(targets).To(HaveLen(2))
		for _, cfg := range targets {
			g.Expect(cfg.TLSCA).To(HaveValue(Equal(plan.TargetTLSDir + "/" + plan.TargetTLSKey(ns, "default", plan.TargetTLSCA, []byte("CA-1")))))
		}
	}).WithTimeout(targetTLSPropagation + time.Minute).Should(Succeed())
}
