package gnmic_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// getWith is a GET of url through a client trusting caPEM and presenting cert (none when nil).
func getWith(caPEM []byte, cert *tls.Certificate, url string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the server's name is a pod's, not 127.0.0.1; only the client side is tested
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// A Cluster that says nothing about TLS gets mutual TLS on the collectors' REST API: the collectors are configured
// with client-auth require-verify against the Cluster's CA (TCP readiness probe, since the kubelet has no client
// certificate), the operator presents a client certificate of that CA, so a stand-in collector enforcing the same
// gets its plan — with the device credentials — while clients without that certificate are refused at the
// handshake; a NetworkPolicy admits the API port from the operator's pods only.
func TestClusterAPIIsMutualTLSByDefault(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := fleet(g, ns, 2)
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.47.0", Replicas: ptrInt32(1)}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "default"))).To(Succeed())

	var serving certs.Pair
	var secret *corev1.Secret
	g.Eventually(func(g Gomega) { serving, secret = secretPair(g, ns, "gnmic-default-api-tls") }).
		WithTimeout(20*time.Second).Should(Succeed(), "the API certificate is issued without spec.api.tls")
	caPEM := secret.Data["ca.crt"]
	g.Expect(caPEM).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-default-config"}, cm)).To(Succeed())
		g.Expect(cm.Data["config.yaml"]).To(And(ContainSubstring("client-auth: require-verify"),
			ContainSubstring("ca-file: /etc/gnmic/tls/ca.crt")))
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-default"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Containers[0].ReadinessProbe.TCPSocket).NotTo(BeNil())
		np := &networkingv1.NetworkPolicy{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-default-api"}, np)).To(Succeed())
		g.Expect(np.Spec.Ingress[0].From).To(HaveLen(1))
		g.Expect(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(Equal(map[string]string{"control-plane": "controller-manager"}))
	}).Should(Succeed())

	srv, err := gnmicserver.StartMutualTLS("127.0.0.1:0", serving.CertPEM, serving.KeyPEM, caPEM)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "default", 0, []*gnmicserver.Server{srv}))).To(Succeed())
	touch(g, ns, "default", "collector-started")
	g.Eventually(func(g Gomega) {
		g.Expect(srv.TargetNames()).To(Equal(names))
		cfg := srv.Config().Targets[names[0]]
		g.Expect(cfg.Password).To(HaveValue(Equal("s3cret")), "credentials go over mutual TLS")
		got := getCluster(g, ns, "default")
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)).To(BeTrue())
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, gnmicv1alpha1.ClusterConditionCredentialsWithheld)).To(BeNil())
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The stand-in enforces what gNMIc's require-verify does: no certificate, or one of another CA, fails the
	// handshake; the operator's own (its Secret, from the Cluster's CA) passes.
	url := srv.URL() + "/api/v1/config"
	g.Expect(getWith(caPEM, nil, url)).To(MatchError(ContainSubstring("certificate")))
	other, err := certs.NewCA("impostor", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	foreign, err := certs.Issue(other, []string{"quartet-operator"}, x509.ExtKeyUsageClientAuth, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	foreignCert, err := tls.X509KeyPair(foreign.CertPEM, foreign.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getWith(caPEM, &foreignCert, url)).To(MatchError(ContainSubstring("certificate")))
	own, ownSecret := secretPair(g, ns, "gnmic-default-operator-client-tls")
	g.Expect(metav1.IsControlledBy(ownSecret, getCluster(g, ns, "default"))).To(BeTrue())
	ownCert, err := tls.X509KeyPair(own.CertPEM, own.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getWith(caPEM, &ownCert, url)).To(Succeed())
	g.Expect(ownSecret.Data).NotTo(HaveKey("ca.key"), "the operator's Secret holds no CA key")
}

// A Cluster that served plain HTTP rolls to mutual TLS (an upgrade, or spec.api.plainHTTP removed): while the
// StatefulSet replaces its pods one at a time, a pod still on plain HTTP is sent nothing — a plan may carry
// credentials — and keeps the targets it holds; each pod restarted with TLS gets its plan (credentials included)
// over mutual TLS, and at the end every target is collected over mutual TLS. Credentials never cross plain HTTP.
func TestClusterRollsToMutualTLSWithoutLosingTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	names := fleet(g, ns, 6)
	plain := collectors(t, 2)
	c := cluster(g, ns, "roll", 2, plain)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "roll"))).To(Succeed())
	g.Eventually(func(g Gomega) { expectServersHoldPlacement(g, ns, "roll", plain, names) }).WithTimeout(30 * time.Second).Should(Succeed())
	before := [][]string{plain[0].TargetNames(), plain[1].TargetNames()}

	g.Expect(env.Client.Patch(ctx, &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "roll"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"api":{"plainHTTP":false}}}`)))).To(Succeed())
	var serving certs.Pair
	var secret *corev1.Secret
	g.Eventually(func(g Gomega) { serving, secret = secretPair(g, ns, "gnmic-roll-api-tls") }).WithTimeout(20 * time.Second).Should(Succeed())

	// Each pod the StatefulSet restarts with the TLS template is served from then on by a mutual-TLS stand-in.
	secure := make([]*gnmicserver.Server, 2)
	start := time.Now()
	observedPlain := 0 // checks made while a pod was still on plain HTTP
	rolled := func(i int) bool {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-roll-" + string(rune('0'+i))}, pod); err != nil {
			return false
		}
		_, ok := pod.Annotations["operator.gnmic.dev/api-cert"]
		return ok
	}
	g.Eventually(func(g Gomega) {
		for i := range 2 {
			if secure[i] == nil && rolled(i) {
				srv, err := gnmicserver.StartMutualTLS("127.0.0.1:0", serving.CertPEM, serving.KeyPEM, secret.Data["ca.crt"])
				g.Expect(err).NotTo(HaveOccurred())
				t.Cleanup(func() { _ = srv.Close() })
				secure[i] = srv
				g.Expect(dialMap.Add(c.CollectorPodAddress(i, "") + "=" + srv.Addr())).To(Succeed())
				t.Logf("pod %d rolled to mutual TLS after %s", i, time.Since(start).Round(time.Millisecond))
				touch(g, ns, "roll", "rolled-"+srv.Addr())
			}
			if secure[i] == nil {
				// Not rolled yet: it holds what it held.
				g.Expect(plain[i].TargetNames()).To(Equal(before[i]), "pod %d on plain HTTP keeps its targets", i)
				observedPlain++
			}
		}
		// Not the slice itself: formatting a live server for a failure message races with its handlers.
		g.Expect([]bool{secure[0] != nil, secure[1] != nil}).To(Equal([]bool{true, true}), "both pods rolled")
		held := append(secure[0].TargetNames(), secure[1].TargetNames()...)
		slices.Sort(held)
		g.Expect(held).To(Equal(names))
		for _, s := range secure {
			for _, name := range s.TargetNames() {
				g.Expect(s.Config().Targets[name].Password).To(HaveValue(Equal("s3cret")))
			}
		}
		g.Expect(meta.IsStatusConditionTrue(getCluster(g, ns, "roll").Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)).To(BeTrue())
	}).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

	t.Logf("every target on a mutual-TLS pod after %s; %d checks saw a pod still on plain HTTP keeping its targets",
		time.Since(start).Round(time.Millisecond), observedPlain)
	g.Expect(observedPlain).To(BeNumerically(">", 0), "the roll was observed while under way")
	// Nothing with a password ever went over plain HTTP.
	for i, s := range plain {
		for _, applied := range s.Applies() {
			for name, tc := range applied.Targets {
				g.Expect(tc.Password).To(BeNil(), "pod %d got %s's password over plain HTTP", i, name)
			}
		}
	}
}
