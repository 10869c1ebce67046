package gnmic_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
)

func TestTargetSourceStaticCreateUpdatePrune(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ts := staticSource(ns, "inv", dev("r1", "10.0.0.1"), dev("r2", "10.0.0.2:6030"), dev("r3", "10.0.0.3"), dev("r4", "10.0.0.4"))
	ts.Spec.Target.Labels = map[string]string{"env": "lab"}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	got := waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(got.Status.Managed).To(Equal(int32(4)))
	g.Expect(got.Status.Discovered).To(Equal(int32(4)))
	g.Expect(got.Status.SourceDigest).To(HaveLen(16))
	g.Expect(got.Status.LastSyncTime.Time).To(BeTemporally("==", fakeClock.Now()))
	g.Expect(got.Status.NextSyncTime.Sub(fakeClock.Now())).To(BeNumerically("~", 5*60e9, 30e9))
	g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReconciling)).To(BeTrue())

	targets := targetsOf(g, ns, "inv")
	g.Expect(targets).To(HaveLen(4))
	r1 := targets["inv-r1"]
	g.Expect(r1.Spec).To(Equal(gnmicv1alpha1.TargetSpec{Address: "10.0.0.1:57400", Profile: "default"}))
	g.Expect(targets["inv-r2"].Spec.Address).To(Equal("10.0.0.2:6030"))
	g.Expect(r1.Labels).To(Equal(map[string]string{"env": "lab", gnmicv1alpha1.LabelTargetSource: "inv",
		gnmicv1alpha1.LabelManagedBy: "targetsource"}))
	g.Expect(r1.Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationDiscoveredName, "r1"))
	ref := metav1.GetControllerOf(&r1)
	g.Expect(ref).NotTo(BeNil())
	g.Expect(ref.UID).To(Equal(got.UID))
	g.Expect(*ref.BlockOwnerDeletion).To(BeTrue())
	// Only the owned fields belong to the TargetSource's field manager, applied (not updated).
	var managers []string
	for _, mf := range r1.ManagedFields {
		managers = append(managers, mf.Manager+"/"+string(mf.Operation))
	}
	g.Expect(managers).To(ContainElement(gnmic.FieldManager("inv") + "/Apply"))
	g.Expect(managers).NotTo(ContainElement(HavePrefix(gnmic.FieldManager("inv") + "/Update")))

	// Update one device and drop one (1 of 4 = 25% ≤ 50%): the update applies and the prune happens.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts), ts)).To(Succeed())
	ts.Spec.Source.Static.Devices = []gnmicv1alpha1.StaticDevice{dev("r1", "10.0.0.11"), dev("r2", "10.0.0.2:6030"), dev("r3", "10.0.0.3")}
	g.Expect(env.Client.Update(ctx, ts)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		got := getTS(g, ns, "inv")
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Pruned).To(Equal(int32(1)))
		g.Expect(got.Status.Managed).To(Equal(int32(3)))
		targets := targetsOf(g, ns, "inv")
		g.Expect(names(targets)).To(ConsistOf("inv-r1", "inv-r2", "inv-r3"))
		g.Expect(targets["inv-r1"].Spec.Address).To(Equal("10.0.0.11:57400"))
	}).Should(Succeed())
}

func TestTargetSourceRepairsDriftAndKeepsUserMetadata(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, staticSource(ns, "inv", dev("r1", "10.0.0.1"), dev("r2", "10.0.0.2")))).To(Succeed())
	waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)

	// A user adds a label and an annotation, edits the address of r1 and deletes r2.
	r1 := &gnmicv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "inv-r1"}, r1)).To(Succeed())
	r1.Labels["team"] = "noc"
	r1.Annotations = map[string]string{"note": "keep me", gnmicv1alpha1.AnnotationDiscoveredName: r1.Annotations[gnmicv1alpha1.AnnotationDiscoveredName],
		gnmicv1alpha1.AnnotationSourceLabels: r1.Annotations[gnmicv1alpha1.AnnotationSourceLabels]}
	r1.Spec.Address = "192.0.2.99:57400"
	g.Expect(env.Client.Update(ctx, r1, client.FieldOwner("someone"))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, &gnmicv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inv-r2"}})).To(Succeed())

	requestRun(t, ns, "inv")
	NewWithT(t).Eventually(func(g Gomega) {
		targets := targetsOf(g, ns, "inv")
		g.Expect(names(targets)).To(ConsistOf("inv-r1", "inv-r2"), "the hand-deleted Target is back")
		r1 := targets["inv-r1"]
		g.Expect(r1.Spec.Address).To(Equal("10.0.0.1:57400"), "the hand-edited address is repaired")
		g.Expect(r1.Labels).To(HaveKeyWithValue("team", "noc"))
		g.Expect(r1.Annotations).To(HaveKeyWithValue("note", "keep me"))
	}).Should(Succeed())

	// A second run with nothing changed writes no Target at all.
	before := targetsOf(g, ns, "inv")
	requestRun(t, ns, "inv")
	after := targetsOf(g, ns, "inv")
	for name, t := range before {
		g.Expect(after[name].ResourceVersion).To(Equal(t.ResourceVersion), "%s was written again", name)
	}

	// Removing the TargetSource label from a managed Target is not a permanent conflict: the label comes back.
	r1 = &gnmicv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "inv-r1"}, r1)).To(Succeed())
	delete(r1.Labels, gnmicv1alpha1.LabelTargetSource)
	g.Expect(env.Client.Update(ctx, r1)).To(Succeed())
	requestRun(t, ns, "inv")
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(targetsOf(g, ns, "inv")).To(HaveKey("inv-r1"))
		ts := getTS(g, ns, "inv")
		g.Expect(ts.Status.Conflicted).To(BeZero())
		g.Expect(meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionConflicted)).To(BeNil())
	}).Should(Succeed())
}

func TestTargetSourceLeavesUnmanagedTargetAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mine := target(ns, "inv-r1", "192.0.2.1:57400", "mine")
	mine.Labels = map[string]string{"owner": "me"}
	g.Expect(env.Client.Create(ctx, mine)).To(Succeed())
	g.Expect(env.Client.Create(ctx, staticSource(ns, "inv", dev("r1", "10.0.0.1"), dev("r2", "10.0.0.2")))).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		ts := getTS(g, ns, "inv")
		g.Expect(ts.Status.Conflicted).To(Equal(int32(1)))
		g.Expect(ts.Status.Managed).To(Equal(int32(1)))
		c := meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionConflicted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(gnmicv1alpha1.ReasonNameConflict))
		g.Expect(c.Message).To(ContainSubstring("inv-r1"))
	}).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mine), mine)).To(Succeed())
	g.Expect(mine.Spec.Address).To(Equal("192.0.2.1:57400"))
	g.Expect(mine.Labels).To(Equal(map[string]string{"owner": "me"}))
	g.Expect(mine.OwnerReferences).To(BeEmpty())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, ns, "inv")).To(ContainElement(gnmicv1alpha1.ReasonNameConflict))
	}).Should(Succeed())

	// Once the user removes their Target, the next run takes the name and the condition goes away.
	g.Expect(env.Client.Delete(ctx, mine)).To(Succeed())
	requestRun(t, ns, "inv")
	NewWithT(t).Eventually(func(g Gomega) {
		ts := getTS(g, ns, "inv")
		g.Expect(ts.Status.Conflicted).To(BeZero())
		g.Expect(meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionConflicted)).To(BeNil())
		g.Expect(targetsOf(g, ns, "inv")).To(HaveLen(2))
	}).Should(Succeed())
}

func TestTargetSourceSanitisingAndNaming(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	long := strings.Repeat("x", 300)
	ts := staticSource(ns, "inv",
		gnmicv1alpha1.StaticDevice{Name: "Core_Router 1", Address: "10.0.0.1", Labels: map[string]string{"rack pos": "A 1", "site": "Zürich"}},
		dev(long, "10.0.0.2"),
		dev("路由器", "10.0.0.3"),
		dev("core-router-1", "10.0.0.9"), // normalises to the same name as "Core_Router 1", which sorts first
		gnmicv1alpha1.StaticDevice{Name: "noaddr", Address: "bad host!"},
	)
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	got := waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(got.Status.Managed).To(Equal(int32(3)))
	g.Expect(got.Status.Invalid).To(Equal(int32(2)))
	g.Expect(got.Status.Sanitized).To(Equal(int32(1)))
	g.Expect(got.Status.FailedDevices).To(ConsistOf(
		gnmicv1alpha1.FailedDevice{Name: "core-router-1", Reason: "DuplicateName"},
		gnmicv1alpha1.FailedDevice{Name: "noaddr", Reason: "MissingAddress"},
	))
	targets := targetsOf(g, ns, "inv")
	core := targets["inv-core-router-1"]
	g.Expect(core.Spec.Address).To(Equal("10.0.0.1:57400"))
	g.Expect(core.Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationDiscoveredName, "Core_Router 1"))
	g.Expect(core.Labels).To(HaveKeyWithValue("rack-pos", "A-1"))
	g.Expect(core.Labels).To(HaveKeyWithValue("site", "Z-rich"))
	g.Expect(core.Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationLabelPrefix+"rack-pos", "rack pos=A 1"))
	g.Expect(core.Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationLabelPrefix+"site", "Zürich"))
	var longName, unicodeName string
	for name, t := range targets {
		switch t.Annotations[gnmicv1alpha1.AnnotationDiscoveredName] {
		case long:
			longName = name
		case "路由器":
			unicodeName = name
		}
	}
	g.Expect(longName).To(HaveLen(253))
	g.Expect(unicodeName).To(MatchRegexp(`^inv-[0-9a-f]{8}$`))
}

func TestTargetSourceMaxTargetsAndSuspend(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ts := staticSource(ns, "inv", dev("r1", "10.0.0.1"), dev("r2", "10.0.0.2"))
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)

	// Three devices with maxTargets 2: CapacityExceeded, nothing changes, not a failure.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts), ts)).To(Succeed())
	ts.Spec.MaxTargets = ptr.To[int32](2)
	ts.Spec.Source.Static.Devices = []gnmicv1alpha1.StaticDevice{dev("r1", "10.0.0.99"), dev("r3", "10.0.0.3"), dev("r4", "10.0.0.4")}
	g.Expect(env.Client.Update(ctx, ts)).To(Succeed())
	got := waitReason(t, ns, "inv", gnmicv1alpha1.ReasonCapacityExceeded)
	g.Expect(got.Status.ConsecutiveFailures).To(BeZero())
	targets := targetsOf(g, ns, "inv")
	g.Expect(names(targets)).To(ConsistOf("inv-r1", "inv-r2"))
	g.Expect(targets["inv-r1"].Spec.Address).To(Equal("10.0.0.1:57400"))

	// Suspended: Ready False Suspended, no next run, and the inventory change is not applied.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts), ts)).To(Succeed())
	ts.Spec.Suspend = true
	ts.Spec.MaxTargets = nil
	g.Expect(env.Client.Update(ctx, ts)).To(Succeed())
	got = waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSuspended)
	g.Expect(got.Status.NextSyncTime).To(BeNil())
	g.Expect(names(targetsOf(g, ns, "inv"))).To(ConsistOf("inv-r1", "inv-r2"))

	// Resuming applies at once.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts), ts)).To(Succeed())
	ts.Spec.Suspend = false
	ts.Spec.Prune.MaxDeleteRatio = ptr.To[int32](100)
	g.Expect(env.Client.Update(ctx, ts)).To(Succeed())
	waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(names(targetsOf(g, ns, "inv"))).To(ConsistOf("inv-r1", "inv-r3", "inv-r4"))
}

func TestTargetSourceWebhook(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for name, tc := range map[string]struct {
		mutate   func(*gnmicv1alpha1.TargetSource)
		wantText string
	}{
		"mapping does not compile": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "ConfigMap", ConfigMap: &gnmicv1alpha1.ObjectSource{
				Name: "inv", Mapping: &gnmicv1alpha1.Mapping{Name: "item.(", Address: "item.ip"}}}
		}, "spec.source.configMap.mapping.name"},
		"sub-field does not match type": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Source.Type = "HTTP"
		}, "http must be set exactly when type is HTTP"},
		"body without POST": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: "http://x/", Body: "{}"}}
		}, "body is only allowed with method POST"},
		"requestParam without nextField": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: "http://x/",
				Pagination: &gnmicv1alpha1.Pagination{RequestParam: "cursor"}}}
		}, "requestParam needs nextField"},
		"ftp url": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: "ftp://x/"}}
		}, "url must be http:// or https://"},
		"two auth modes": {func(ts *gnmicv1alpha1.TargetSource) {
			ref := gnmicv1alpha1.SecretKeyRef{Name: "s", Key: "k"}
			ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: "http://x/",
				Auth: &gnmicv1alpha1.HTTPAuth{Token: &gnmicv1alpha1.TokenAuth{SecretRef: ref}, Header: &gnmicv1alpha1.HeaderAuth{Name: "X", SecretRef: ref}}}}
		}, "exactly one of basic, token or header"},
		"interval too short": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Interval = &metav1.Duration{Duration: 5e9}
		}, "interval must be at least 10s"},
		"webhook without auth": {func(ts *gnmicv1alpha1.TargetSource) {
			ts.Spec.Webhook = &gnmicv1alpha1.RefreshWebhook{Enabled: true}
		}, "auth is required when the webhook is enabled"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ts := staticSource(ns, "bad", dev("r1", "10.0.0.1"))
			tc.mutate(ts)
			err := env.Client.Create(ctx, ts)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.wantText))
		})
	}

	t.Run("missing references are warnings", func(t *testing.T) {
		g := NewWithT(t)
		handler := &warningCollector{}
		cfg := *env.Config
		cfg.WarningHandler = handler
		c, err := client.New(&cfg, client.Options{Scheme: env.Client.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		ts := staticSource(ns, "warn", dev("r1", "10.0.0.1"))
		ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "Secret", Secret: &gnmicv1alpha1.ObjectSource{Name: "nope"}}
		g.Expect(c.Create(ctx, ts)).To(Succeed())
		g.Expect(handler.messages).To(ContainElements(
			ContainSubstring(`Secret "nope" does not exist`), ContainSubstring(`TargetProfile "default" does not exist`)))
		got := waitReason(t, ns, "warn", gnmicv1alpha1.ReasonSecretNotFound)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.TargetSourceConditionStalled)).To(BeTrue())
	})
}

type warningCollector struct{ messages []string }

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.messages = append(w.messages, text)
}

func TestSeedExampleAppliesVerbatim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	seed := `apiVersion: operator.gnmic.dev/v1alpha1
kind: TargetSource
metadata:
  name: inventory
spec:
  interval: 5m
  source:
    type: HTTP
    http:
      url: https://inventory.example.com/api/devices
      auth:
        token:
          secretRef: { name: inventory, key: token }
      mapping:
        items: self.results
        name: item.hostname
        address: item.mgmt_ip
  target:
    profile: default
`
	u := mustUnstructured(g, seed)
	u.SetNamespace(ns)
	g.Expect(env.Client.Create(ctx, u)).To(Succeed())
	ts := getTS(g, ns, "inventory")
	g.Expect(ts.Spec.Timeout.Duration.String()).To(Equal("1m0s"))
	g.Expect(*ts.Spec.MaxTargets).To(Equal(int32(10000)))
	g.Expect(ts.Spec.Target.Port).To(Equal(int32(57400)))
	g.Expect(ts.Spec.Source.HTTP.Method).To(Equal("GET"))
	g.Expect(ts.Spec.Source.HTTP.Auth.Token.Scheme).To(Equal("Bearer"))
	g.Expect(ts.Spec.Source.HTTP.Mapping.OnError).To(Equal("Skip"))
	// Without the token Secret it stalls and says why.
	waitReason(t, ns, "inventory", gnmicv1alpha1.ReasonSecretNotFound)
}
