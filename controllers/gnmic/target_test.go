package gnmic_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

var namespaceCounter atomic.Int32

// newNamespace creates a namespace of the test's own, so tests never see each other's objects.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gnmic-%d", namespaceCounter.Add(1))}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func target(ns, name, address, profile string) *gnmicv1alpha1.Target {
	return &gnmicv1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gnmicv1alpha1.TargetSpec{Address: address, Profile: profile},
	}
}

func TestTargetWebhookRejectsBadAddresses(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		address, profile string
		wantField        string
		wantText         string
	}{
		"no port":            {"router1", "default", "spec.address", "must be host:port"},
		"port zero":          {"router1:0", "default", "spec.address", "port from 1 to 65535"},
		"port too large":     {"router1:65536", "default", "spec.address", "port from 1 to 65535"},
		"port not a number":  {"router1:gnmi", "default", "spec.address", "port from 1 to 65535"},
		"no host":            {":57400", "default", "spec.address", "must be host:port"},
		"bad host":           {"router_1:57400", "default", "spec.address", "host must be an IP address or a DNS name"},
		"bracketed hostname": {"[router1]:57400", "default", "spec.address", "brackets are only allowed around an IPv6"},
		"profile not a name": {"router1:57400", "Default Profile", "spec.profile", "lowercase RFC 1123"},
		"profile missing":    {"router1:57400", "", "spec.profile", "at least 1 chars long"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, target(ns, "bad", tc.address, tc.profile))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(And(ContainSubstring(tc.wantField), ContainSubstring(tc.wantText)))
		})
	}
}

func TestTargetWebhookIsCalledByTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()

	err := env.Client.Create(ctx, target(ns, "router1", "router1", "default"))
	g.Expect(err).To(MatchError(ContainSubstring(`admission webhook "vtarget-v1alpha1.operator.gnmic.dev" denied the request`)))

	ok := target(ns, "router1", "[2001:db8::1]:57400", "default")
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())

	// The controller may write status in between, so retry on conflicts until the webhook is what answers.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ok), ok)).To(Succeed())
		ok.Spec.Address = "router1:99999"
		err = env.Client.Update(ctx, ok)
		g.Expect(apierrors.IsConflict(err)).To(BeFalse())
	}).Should(Succeed())
	g.Expect(err).To(MatchError(ContainSubstring("spec.address")), "updates are validated too")
}

func TestTargetProfileDefaultsAndValidation(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()

	t.Run("defaults", func(t *testing.T) {
		g := NewWithT(t)
		p := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minimal"}}
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		g.Expect(p.Spec.Timeout.Duration).To(Equal(10 * time.Second))
		g.Expect(p.Spec.RetryTimer.Duration).To(Equal(2 * time.Second))
		g.Expect(p.Spec.Encoding).To(Equal(gnmicv1alpha1.EncodingJSON))
	})

	for name, tc := range map[string]struct {
		spec     gnmicv1alpha1.TargetProfileSpec
		wantText []string
	}{
		"retry timer below 2s": {
			gnmicv1alpha1.TargetProfileSpec{RetryTimer: &metav1.Duration{Duration: time.Second}},
			[]string{"spec.retryTimer", "at least 2s"}},
		"zero timeout": {
			gnmicv1alpha1.TargetProfileSpec{Timeout: &metav1.Duration{}},
			[]string{"spec.timeout", "greater than zero"}},
		"unknown encoding": {
			gnmicv1alpha1.TargetProfileSpec{Encoding: "XML"},
			[]string{"spec.encoding", "Unsupported value"}},
		"tls max below min": {
			gnmicv1alpha1.TargetProfileSpec{TLS: &gnmicv1alpha1.ClientTLS{MinVersion: "1.3", MaxVersion: "1.2"}},
			[]string{"spec.tls.maxVersion", "must not be lower than minVersion"}},
		"unknown cipher": {
			gnmicv1alpha1.TargetProfileSpec{TLS: &gnmicv1alpha1.ClientTLS{CipherSuites: []string{"TLS_NOPE"}}},
			[]string{"spec.tls.cipherSuites[0]", "unknown cipher suite"}},
		"http proxy": {
			gnmicv1alpha1.TargetProfileSpec{Proxy: "http://proxy:3128"},
			[]string{"spec.proxy", "socks5://host:port"}},
		"negative keepalive": {
			gnmicv1alpha1.TargetProfileSpec{GRPCKeepAlive: &gnmicv1alpha1.GRPCKeepAlive{Time: &metav1.Duration{Duration: -time.Second}}},
			[]string{"spec.grpcKeepAlive.time", "greater than zero"}},
		"bad label key": {
			gnmicv1alpha1.TargetProfileSpec{Labels: map[string]string{"bad key": "x"}},
			[]string{"spec.labels[bad key]"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: tc.spec}
			err := env.Client.Create(ctx, p)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, text := range tc.wantText {
				g.Expect(err.Error()).To(ContainSubstring(text))
			}
		})
	}
}

func TestTargetProfileResolution(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()

	tgt := target(ns, "router1", "router1.lab.example.net:57400", "lab")
	g.Expect(env.Client.Create(ctx, tgt)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
		cond := meta.FindStatusCondition(tgt.Status.Conditions, gnmicv1alpha1.TargetConditionProfileResolved)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonProfileNotFound))
		g.Expect(tgt.Status.ObservedGeneration).To(Equal(tgt.Generation))
		ready := meta.FindStatusCondition(tgt.Status.Conditions, gnmicv1alpha1.TargetConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(gnmicv1alpha1.ReasonProfileNotFound))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", gnmicv1alpha1.ReasonProfileNotFound),
			HaveField("Regarding.Name", "router1"),
			HaveField("Type", corev1.EventTypeWarning))))
	}).Should(Succeed())

	// Creating the profile resolves the Target without touching it.
	profile := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"}}
	g.Expect(env.Client.Create(ctx, profile)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tgt.Status.Conditions, gnmicv1alpha1.TargetConditionProfileResolved)).To(BeTrue())
		// Resolved but selected by no Pipeline: not Ready, and the reason says why.
		ready := meta.FindStatusCondition(tgt.Status.Conditions, gnmicv1alpha1.TargetConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(gnmicv1alpha1.ReasonTargetNotCollected))
	}).Should(Succeed())

	// The profile counts the Targets that use it, following a Target that switches profile.
	g.Expect(env.Client.Create(ctx, target(ns, "router2", "192.0.2.2:57400", "lab"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(profile), profile)).To(Succeed())
		g.Expect(profile.Status.Targets).To(Equal(int32(2)))
		g.Expect(meta.IsStatusConditionTrue(profile.Status.Conditions, "Ready")).To(BeTrue())
	}).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
	tgt.Spec.Profile = "elsewhere"
	g.Expect(env.Client.Update(ctx, tgt)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(profile), profile)).To(Succeed())
		g.Expect(profile.Status.Targets).To(Equal(int32(1)))
	}).Should(Succeed())
}

func TestTargetProfileCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()

	missing := &gnmicv1alpha1.TargetProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"},
		Spec:       gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "nope"}},
	}
	g.Expect(env.Client.Create(ctx, missing)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(missing), missing)).To(Succeed())
		cond := meta.FindStatusCondition(missing.Status.Conditions, "Ready")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonCredentialsNotFound))
		g.Expect(cond.Message).To(ContainSubstring(`"nope"`))
	}).Should(Succeed())

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gnmi"},
		StringData: map[string]string{"username": "admin", "password": "admin"},
	}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	found := &gnmicv1alpha1.TargetProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "found"},
		Spec:       gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "gnmi"}},
	}
	g.Expect(env.Client.Create(ctx, found)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(found), found)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(found.Status.Conditions, "Ready")).To(BeTrue())
	}).Should(Succeed())
}

func TestTargetSummarisesClusterStates(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}})).To(Succeed())
	tgt := target(ns, "router1", "router1:57400", "p")
	g.Expect(env.Client.Create(ctx, tgt)).To(Succeed())

	// What the Cluster controller writes: one cluster ready, one still connecting.
	patch := client.MergeFrom(tgt.DeepCopy())
	tgt.Status.ClusterStates = map[string]gnmicv1alpha1.ClusterTargetState{
		"core": {Pod: "gnmic-core-0", State: "running", ConnectionState: "READY"},
		"edge": {Pod: "gnmic-edge-1", State: "running", ConnectionState: "CONNECTING"},
	}
	g.Expect(env.Client.Status().Patch(ctx, tgt, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
		g.Expect(tgt.Status.Clusters).To(Equal(int32(2)))
		g.Expect(tgt.Status.ConnectionState).To(Equal(gnmicv1alpha1.ConnectionStateDegraded))
	}).Should(Succeed())

	patch = client.MergeFrom(tgt.DeepCopy())
	edge := tgt.Status.ClusterStates["edge"]
	edge.ConnectionState = "READY"
	tgt.Status.ClusterStates["edge"] = edge
	g.Expect(env.Client.Status().Patch(ctx, tgt, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
		g.Expect(tgt.Status.ConnectionState).To(Equal(gnmicv1alpha1.ConnectionStateReady))
	}).Should(Succeed())
}

func TestNoOpReconcileDoesNotWrite(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}})).To(Succeed())
	tgt := target(ns, "router1", "router1:57400", "p")
	g.Expect(env.Client.Create(ctx, tgt)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tgt.Status.Conditions, gnmicv1alpha1.TargetConditionProfileResolved)).To(BeTrue())
	}).Should(Succeed())

	// A metadata-only change triggers a reconcile that has nothing to do: no status write may follow it.
	tgt.Annotations = map[string]string{"example.com/touched": "yes"}
	g.Expect(env.Client.Update(ctx, tgt)).To(Succeed())
	touched := tgt.ResourceVersion
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tgt), tgt)).To(Succeed())
		g.Expect(tgt.ResourceVersion).To(Equal(touched))
	}).WithTimeout(2 * time.Second).Should(Succeed())
}
