package gnmic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
)

// inventory is a local HTTP inventory whose answer and accepted credentials tests change as they go.
type inventory struct {
	mu      sync.Mutex
	devices []map[string]any
	loop    bool   // answer with a Link rel="next" back to the same page
	status  int    // non-zero: answer with this status
	token   string // required bearer token; empty accepts any request
	user    string // required basic user (password "pw")
	header  string // required X-Api-Key value
	srv     *httptest.Server
}

func newInventory(t *testing.T) *inventory {
	inv := &inventory{}
	inv.srv = httptest.NewServer(http.HandlerFunc(inv.serve))
	t.Cleanup(inv.srv.Close)
	return inv
}

func (inv *inventory) set(f func(*inventory)) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	f(inv)
}

func (inv *inventory) serve(w http.ResponseWriter, r *http.Request) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	user, pass, _ := r.BasicAuth()
	switch {
	case inv.token != "" && r.Header.Get("Authorization") != "Bearer "+inv.token,
		inv.user != "" && (user != inv.user || pass != "pw"),
		inv.header != "" && r.Header.Get("X-Api-Key") != inv.header:
		w.WriteHeader(http.StatusUnauthorized)
		return
	case inv.status != 0:
		w.WriteHeader(inv.status)
		return
	}
	if inv.loop {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, r.URL.Path))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"results": inv.devices})
}

func devices(names ...string) []map[string]any {
	out := make([]map[string]any, 0, len(names))
	for i, n := range names {
		out = append(out, map[string]any{"hostname": n, "mgmt_ip": fmt.Sprintf("10.1.0.%d", i+1)})
	}
	return out
}

func httpSource(ns, name, url string) *gnmicv1alpha1.TargetSource {
	ts := staticSource(ns, name)
	ts.Spec.Source = gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{
		URL:        url,
		Mapping:    &gnmicv1alpha1.Mapping{Items: "self.results", Name: "item.hostname", Address: "item.mgmt_ip"},
		Pagination: &gnmicv1alpha1.Pagination{MaxPages: 5},
	}}
	return ts
}

func TestTargetSourcePruneGuards(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	inv := newInventory(t)
	inv.set(func(i *inventory) { i.devices = devices("r1", "r2", "r3", "r4") })
	g.Expect(env.Client.Create(ctx, httpSource(ns, "guarded", inv.srv.URL+"/devices"))).To(Succeed())
	waitReason(t, ns, "guarded", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(targetsOf(g, ns, "guarded")).To(HaveLen(4))

	expectHeld := func(reason string, wantTargets ...string) {
		t.Helper()
		requestRun(t, ns, "guarded")
		ts := waitReason(t, ns, "guarded", reason)
		g.Expect(ts.Status.ConsecutiveFailures).To(BeZero(), "a held prune is not a failure")
		g.Expect(ts.Status.NextSyncTime.Sub(ts.Status.LastSyncTime.Time)).To(BeNumerically("<", 6*time.Minute))
		rec := meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReconciling)
		g.Expect(rec.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(rec.Reason).To(Equal(reason))
		g.Expect(ts.Status.Pruned).To(BeZero())
		g.Expect(names(targetsOf(g, ns, "guarded"))).To(ConsistOf(wantTargets))
		g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns, "guarded")).To(ContainElement(reason)) }).Should(Succeed())
	}

	// A pagination loop: the answer is incomplete, so nothing is deleted, but the new device is created.
	inv.set(func(i *inventory) { i.devices, i.loop = devices("r1", "r5"), true })
	expectHeld(gnmicv1alpha1.ReasonTruncated, "guarded-r1", "guarded-r2", "guarded-r3", "guarded-r4", "guarded-r5")

	// An empty answer.
	inv.set(func(i *inventory) { i.devices, i.loop = nil, false })
	expectHeld(gnmicv1alpha1.ReasonEmptySource, "guarded-r1", "guarded-r2", "guarded-r3", "guarded-r4", "guarded-r5")

	// 4 of 5 deletions (80% > 50%); the update of r1's address still applies.
	inv.set(func(i *inventory) {
		i.devices = devices("r1")
		i.devices[0]["mgmt_ip"] = "10.9.9.9"
	})
	expectHeld(gnmicv1alpha1.ReasonPruneGuard, "guarded-r1", "guarded-r2", "guarded-r3", "guarded-r4", "guarded-r5")
	g.Expect(targetsOf(g, ns, "guarded")["guarded-r1"].Spec.Address).To(Equal("10.9.9.9:57400"))

	// 2 of 5 (40% ≤ 50%): the guard clears and the prune happens.
	inv.set(func(i *inventory) { i.devices = devices("r1", "r2", "r3") })
	requestRun(t, ns, "guarded")
	ts := waitReason(t, ns, "guarded", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(ts.Status.Pruned).To(Equal(int32(2)))
	g.Expect(names(targetsOf(g, ns, "guarded"))).To(ConsistOf("guarded-r1", "guarded-r2", "guarded-r3"))
}

func TestTargetSourceBackoffSequence(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	inv := newInventory(t)
	inv.set(func(i *inventory) { i.status = http.StatusInternalServerError })
	g.Expect(env.Client.Create(ctx, httpSource(ns, "flaky", inv.srv.URL))).To(Succeed())
	want := []time.Duration{5, 10, 20, 40, 50, 50}
	for n, minutes := range want {
		if n > 0 {
			requestRun(t, ns, "flaky")
		}
		g.Eventually(func(g Gomega) {
			ts := getTS(g, ns, "flaky")
			g.Expect(ts.Status.ConsecutiveFailures).To(Equal(int32(n + 1)))
			base := minutes * time.Minute
			g.Expect(ts.Status.LastSyncTime.Time).To(BeTemporally("==", fakeClock.Now()))
			delay := ts.Status.NextSyncTime.Sub(ts.Status.LastSyncTime.Time)
			g.Expect(delay).To(BeNumerically(">=", base), "failure %d", n+1)
			g.Expect(delay).To(BeNumerically("<", base+base/10+time.Second), "failure %d: jitter is at most 10%%", n+1)
			c := meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReady)
			g.Expect(c.Reason).To(Equal(gnmicv1alpha1.ReasonFetchFailed))
			g.Expect(ts.Status.LastError).To(ContainSubstring("HTTP 500"))
		}).Should(Succeed())
	}
	// One event for the first failure only.
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns, "flaky")).To(HaveLen(1)) }).Should(Succeed())
	// The next success resets the count and the interval.
	inv.set(func(i *inventory) { i.status, i.devices = 0, devices("a") })
	requestRun(t, ns, "flaky")
	ts := waitReason(t, ns, "flaky", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(ts.Status.ConsecutiveFailures).To(BeZero())
	g.Expect(ts.Status.LastError).To(BeEmpty())
	g.Expect(ts.Status.NextSyncTime.Sub(ts.Status.LastSyncTime.Time)).To(BeNumerically("<", 6*time.Minute))
	g.Expect(targetsource.BaseDelay(5*time.Minute, 5)).To(Equal(50 * time.Minute))
}

func TestTargetSourceAuthModesAndSecretRotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"token": "t1", "username": "admin", "password": "pw", "key": "k1"}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

	tokenInv, basicInv, headerInv := newInventory(t), newInventory(t), newInventory(t)
	tokenInv.set(func(i *inventory) { i.token, i.devices = "t1", devices("a") })
	basicInv.set(func(i *inventory) { i.user, i.devices = "admin", devices("b") })
	headerInv.set(func(i *inventory) { i.header, i.devices = "k1", devices("c") })
	ref := gnmicv1alpha1.SecretKeyRef{Name: "creds", Key: "token"}
	tok := httpSource(ns, "token", tokenInv.srv.URL)
	tok.Spec.Source.HTTP.Auth = &gnmicv1alpha1.HTTPAuth{Token: &gnmicv1alpha1.TokenAuth{SecretRef: ref}}
	basic := httpSource(ns, "basic", basicInv.srv.URL)
	basic.Spec.Source.HTTP.Auth = &gnmicv1alpha1.HTTPAuth{Basic: &gnmicv1alpha1.BasicAuth{SecretRef: gnmicv1alpha1.LocalObjectRef{Name: "creds"}}}
	header := httpSource(ns, "header", headerInv.srv.URL)
	header.Spec.Source.HTTP.Auth = &gnmicv1alpha1.HTTPAuth{Header: &gnmicv1alpha1.HeaderAuth{Name: "X-Api-Key",
		SecretRef: gnmicv1alpha1.SecretKeyRef{Name: "creds", Key: "key"}}}
	for _, ts := range []*gnmicv1alpha1.TargetSource{tok, basic, header} {
		g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
		got := waitReason(t, ns, ts.Name, gnmicv1alpha1.ReasonSucceeded)
		g.Expect(got.Status.Managed).To(Equal(int32(1)), ts.Name)
	}

	// The inventory rotates its token: runs fail until the Secret holds the new one, and updating the Secret
	// starts a run at once (no refresh request, no interval).
	tokenInv.set(func(i *inventory) { i.token, i.devices = "t2", devices("a", "a2") })
	requestRun(t, ns, "token")
	waitReason(t, ns, "token", gnmicv1alpha1.ReasonFetchFailed)
	before := runs(g, ns, "token")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.Data["token"] = []byte("t2")
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	got := waitReason(t, ns, "token", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(got.Status.Managed).To(Equal(int32(2)))
	g.Expect(runs(g, ns, "token")).To(BeNumerically(">", before))

	// A metadata-only change of the Secret does not start a run.
	settled := runs(g, ns, "token")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.Labels = map[string]string{"touched": "yes"}
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(runs(g, ns, "token")).To(Equal(settled)) }, 2*time.Second).Should(Succeed())
}

func TestTargetSourceCrossOriginPageRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	other := newInventory(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", fmt.Sprintf(`<%s/steal>; rel="next"`, other.srv.URL))
		_, _ = fmt.Fprint(w, `{"results":[]}`)
	}))
	t.Cleanup(srv.Close)
	g.Expect(env.Client.Create(ctx, httpSource(ns, "leaky", srv.URL))).To(Succeed())
	ts := waitReason(t, ns, "leaky", gnmicv1alpha1.ReasonCrossOrigin)
	g.Expect(ts.Status.LastError).To(ContainSubstring("leave the source's origin"))
}

// An inventory that redirects to another host gets no credential sent there: the run fails with CrossOrigin and
// the other host sees no request (auth.header secrets and custom headers would otherwise follow the redirect).
func TestTargetSourceCrossOriginRedirectRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	var stolen atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		stolen.Add(1)
		_, _ = fmt.Fprint(w, `{"results":[]}`)
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/devices", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "key"},
		StringData: map[string]string{"key": "secret"}})).To(Succeed())
	ts := httpSource(ns, "redirected", srv.URL)
	ts.Spec.Source.HTTP.Headers = map[string]string{"X-Tenant": "t1"}
	ts.Spec.Source.HTTP.Auth = &gnmicv1alpha1.HTTPAuth{Header: &gnmicv1alpha1.HeaderAuth{Name: "X-Api-Key",
		SecretRef: gnmicv1alpha1.SecretKeyRef{Name: "key", Key: "key"}}}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	got := waitReason(t, ns, "redirected", gnmicv1alpha1.ReasonCrossOrigin)
	g.Expect(got.Status.LastError).To(ContainSubstring("redirected to " + other.URL))
	g.Expect(stolen.Load()).To(BeZero())
}
