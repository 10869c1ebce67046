package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// recordServer serves a JSON document the test can swap.
type recordServer struct {
	*httptest.Server
	mu  sync.Mutex
	doc any
}

func newRecordServer(t *testing.T, doc any) *recordServer {
	rs := &recordServer{doc: doc}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		_ = json.NewEncoder(w).Encode(rs.doc)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordServer) set(doc any) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.doc = doc
}

func httpSync(ns, name, url string, sel fleetv1alpha1.PolicySelector, fields map[string]string) *fleetv1alpha1.ExternalAttributeSync {
	return &fleetv1alpha1.ExternalAttributeSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
			Source:   fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindHTTP, HTTP: &fleetv1alpha1.HTTPSource{URL: url, RecordsPath: "items"}},
			Schedule: "1h",
			Selector: sel,
			Mapping:  fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: fields},
		},
	}
}

func owners(c *fleetv1alpha1.Collector) map[string]string {
	out := map[string]string{}
	for _, o := range c.Status.AttributeOwners {
		out[o.Key] = string(o.OwnerKind) + " " + o.OwnerName
	}
	return out
}

// TestPrecedenceAcrossSpecPoliciesAndSyncs: with a Collector spec, two RemoteAttributePolicies and an
// ExternalAttributeSync all claiming keys of one collector, Fleet ends up with sync > spec > policy (higher
// priority first), and removing the sync hands its keys back to the next claimant.
func TestPrecedenceAcrossSpecPoliciesAndSyncs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	id := ns + "-edge"
	srv.PutCollector(&collectorv1.Collector{Id: id, CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY,
		LocalAttributes: map[string]string{"os": "linux"}, RemoteAttributes: map[string]string{"set-in-ui": "keep"}})

	col := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"env": "prod", "owner": "spec"}}}
	g.Expect(env.Client.Create(ctx, col)).To(Succeed())
	low := &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-low"},
		Spec: fleetv1alpha1.RemoteAttributePolicySpec{Priority: 10,
			Selector:   fleetv1alpha1.PolicySelector{Matchers: []string{`env="prod"`, `os="linux"`}},
			Attributes: map[string]string{"owner": "policy", "tier": "bronze", "zone": "a", "cost": "low"}}}
	high := &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-high"},
		Spec: fleetv1alpha1.RemoteAttributePolicySpec{Priority: 20,
			Selector:   fleetv1alpha1.PolicySelector{Matchers: []string{`collector.id=~".+-edge"`}},
			Attributes: map[string]string{"tier": "silver", "zone": "b"}}}
	// An unanchored regex would match "prod" against "pro"; Alertmanager anchors it, so this one matches nothing.
	none := &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-none"},
		Spec: fleetv1alpha1.RemoteAttributePolicySpec{Priority: 99,
			Selector:   fleetv1alpha1.PolicySelector{Matchers: []string{`env=~"pro"`}},
			Attributes: map[string]string{"tier": "wrong"}}}
	for _, p := range []*fleetv1alpha1.RemoteAttributePolicy{low, high, none} {
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{
			"set-in-ui": "keep", "env": "prod", "owner": "spec", "tier": "silver", "zone": "b", "cost": "low"}))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		p := &fleetv1alpha1.RemoteAttributePolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(high), p)).To(Succeed())
		g.Expect(p.Status.MatchedCollectorIDs).To(Equal([]string{id}))
		g.Expect(p.Status.MatchedCount).To(BeEquivalentTo(1))
		g.Expect(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionReady).Reason).To(Equal(fleetv1alpha1.ReasonMatched))
		g.Expect(meta.IsStatusConditionFalse(p.Status.Conditions, fleetv1alpha1.ConditionTruncated)).To(BeTrue())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(none), p)).To(Succeed())
		g.Expect(p.Status.MatchedCollectorIDs).To(BeEmpty())
		g.Expect(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionSynced).Reason).To(Equal(fleetv1alpha1.ReasonNoMatch))
	}).Should(Succeed())

	records := newRecordServer(t, map[string]any{"items": []map[string]any{
		{"id": id, "tier": "platinum", "rack": "r7", "owner": "sync"},
		{"id": "someone-else", "tier": "x"},
	}})
	sync := httpSync(ns, "cmdb", records.URL, fleetv1alpha1.PolicySelector{CollectorIDs: []string{id}},
		map[string]string{"tier": "tier", "rack": "rack", "owner": "owner"})
	g.Expect(env.Client.Create(ctx, sync)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{
			"set-in-ui": "keep", "env": "prod", "owner": "sync", "tier": "platinum", "zone": "b", "cost": "low", "rack": "r7"}))
		c := collectorReady(g, client.ObjectKeyFromObject(col))
		g.Expect(owners(c)).To(Equal(map[string]string{
			"env":   "Collector " + ns + "/edge",
			"owner": "ExternalAttributeSync " + ns + "/cmdb",
			"tier":  "ExternalAttributeSync " + ns + "/cmdb",
			"rack":  "ExternalAttributeSync " + ns + "/cmdb",
			"zone":  "RemoteAttributePolicy " + ns + "/b-high",
			"cost":  "RemoteAttributePolicy " + ns + "/a-low",
		}))
	}).Should(Succeed())
	s := &fleetv1alpha1.ExternalAttributeSync{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sync), s)).To(Succeed())
	g.Expect(s.Status.RecordsSeen).To(BeEquivalentTo(2))
	g.Expect(s.Status.RecordsApplied).To(BeEquivalentTo(1), "someone-else is outside the selector")
	g.Expect(s.Status.OwnedKeys).To(Equal([]fleetv1alpha1.OwnedAttributes{{CollectorID: id,
		Attributes: map[string]string{"tier": "platinum", "rack": "r7", "owner": "sync"}}}))

	// Without the sync, its keys go back to the spec and the policies, and the key only it set is removed.
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{
			"set-in-ui": "keep", "env": "prod", "owner": "spec", "tier": "silver", "zone": "b", "cost": "low"}))
	}).Should(Succeed())

	// A selector change that drops the collector takes the policy's keys with it.
	p := &fleetv1alpha1.RemoteAttributePolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(low), p)).To(Succeed())
	p.Spec.Selector.Matchers = []string{`env="dev"`}
	g.Expect(env.Client.Update(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{
			"set-in-ui": "keep", "env": "prod", "owner": "spec", "tier": "silver", "zone": "b"}))
	}).Should(Succeed())
}

func syncCondition(g Gomega, key client.ObjectKey, typ string) *metav1.Condition {
	s := &fleetv1alpha1.ExternalAttributeSync{}
	g.Expect(env.Client.Get(context.Background(), key, s)).To(Succeed())
	c := meta.FindStatusCondition(s.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no %s condition yet: %v", typ, s.Status.Conditions)
	return c
}

// TestExternalAttributeSyncGuards: the empty-result guard keeps the claim (Stalled), more than 1000 collectors
// drop it (Truncated, fail closed), and sources the SSRF guard refuses fail without a request.
func TestExternalAttributeSyncGuards(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	id := ns + "-edge"
	srv.PutCollector(&collectorv1.Collector{Id: id})
	col := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: fleetv1alpha1.CollectorSpec{ID: id}}
	g.Expect(env.Client.Create(ctx, col)).To(Succeed())

	records := newRecordServer(t, map[string]any{"items": []map[string]any{{"id": id, "rack": "r1"}}})
	sync := httpSync(ns, "inv", records.URL, fleetv1alpha1.PolicySelector{Matchers: []string{`collector.id=~".*"`}}, map[string]string{"rack": "rack"})
	g.Expect(env.Client.Create(ctx, sync)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("rack", "r1"))
	}).Should(Succeed())

	// The source empties: the claim stays, Stalled is set.
	records.set(map[string]any{"items": []any{}})
	bump := func(mutate func(*fleetv1alpha1.ExternalAttributeSync)) {
		s := &fleetv1alpha1.ExternalAttributeSync{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sync), s)).To(Succeed())
		mutate(s)
		g.Expect(env.Client.Update(ctx, s)).To(Succeed()) // a spec change runs the sync at once
	}
	bump(func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Schedule = "2h" })
	g.Eventually(func(g Gomega) {
		c := syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionStalled)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionReady).Reason).To(Equal(fleetv1alpha1.ReasonStalled))
	}).Should(Succeed())
	s := &fleetv1alpha1.ExternalAttributeSync{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sync), s)).To(Succeed())
	g.Expect(s.Status.OwnedKeys).To(HaveLen(1))
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("rack", "r1"))
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns, "inv")).To(ContainElement("Stalled")) }).Should(Succeed())

	// More than 1000 collectors: the whole claim is dropped (fail closed) and the attribute leaves Fleet.
	many := make([]map[string]any, 0, fleetv1alpha1.MaxOwnedCollectors+1)
	for i := range fleetv1alpha1.MaxOwnedCollectors + 1 {
		many = append(many, map[string]any{"id": fmt.Sprintf("%s-%04d", id, i), "rack": "rX"})
	}
	many[0]["id"] = id
	records.set(map[string]any{"items": many})
	bump(func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Schedule = "3h" })
	g.Eventually(func(g Gomega) {
		c := syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionTruncated)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(fleetv1alpha1.ReasonOwnedKeysExceeded))
		g.Expect(srv.Collector(id).GetRemoteAttributes()).NotTo(HaveKey("rack"))
	}).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sync), s)).To(Succeed())
	g.Expect(s.Status.OwnedKeys).To(BeEmpty())

	// Back under the limit, with empty results allowed: the claim returns, then an empty source clears it.
	records.set(map[string]any{"items": []map[string]any{{"id": id, "rack": "r2"}}})
	bump(func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.AllowEmptyResults = true })
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("rack", "r2"))
		g.Expect(syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionTruncated).Status).To(Equal(metav1.ConditionFalse))
	}).Should(Succeed())
	records.set(map[string]any{"items": []any{}})
	bump(func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Schedule = "4h" })
	g.Eventually(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).NotTo(HaveKey("rack"))
		g.Expect(syncCondition(g, client.ObjectKeyFromObject(sync), fleetv1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
	}).Should(Succeed())

	// A redirect to the metadata address is refused at dial time; the status names the host, not the path.
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer redirect.Close()
	bad := httpSync(ns, "redirected", redirect.URL+"/secret-path?token=abc", fleetv1alpha1.PolicySelector{CollectorIDs: []string{id}}, map[string]string{"rack": "rack"})
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := syncCondition(g, client.ObjectKeyFromObject(bad), fleetv1alpha1.ConditionReady)
		g.Expect(c.Reason).To(Equal(fleetv1alpha1.ReasonSourceFailed))
		g.Expect(c.Message).To(ContainSubstring("blocked by the SSRF guard"))
		g.Expect(c.Message).NotTo(ContainSubstring("secret-path"))
		g.Expect(c.Message).NotTo(ContainSubstring("token=abc"))
	}).Should(Succeed())
}

// TestAttributeKindsAdmission: the webhooks of both kinds reject through the API server, naming the field.
func TestAttributeKindsAdmission(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	cases := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"metadata URL", httpSync(ns, "meta", "http://169.254.169.254/latest/meta-data", fleetv1alpha1.PolicySelector{CollectorIDs: []string{"a"}}, map[string]string{"k": "k"}),
			"spec.source.http.url"},
		{"cluster service", httpSync(ns, "svc", "https://cmdb.tools.svc/x", fleetv1alpha1.PolicySelector{CollectorIDs: []string{"a"}}, map[string]string{"k": "k"}),
			"in-cluster"},
		{"empty selector", httpSync(ns, "nosel", "https://cmdb.example.com/x", fleetv1alpha1.PolicySelector{}, map[string]string{"k": "k"}),
			"spec.selector"},
		{"SQL write", &fleetv1alpha1.ExternalAttributeSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sqlw"},
			Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
				Source: fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindSQL, SecretRef: &fleetv1alpha1.SecretReference{Name: "db"},
					SQL: &fleetv1alpha1.SQLSource{Driver: fleetv1alpha1.SQLDriverPostgres, Query: "COMMIT; INSERT INTO t VALUES (1)"}},
				Schedule: "5m", Selector: fleetv1alpha1.PolicySelector{CollectorIDs: []string{"a"}},
				Mapping: fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: map[string]string{"k": "k"}}}},
			"spec.source.sql.query"},
		{"bad schedule", func() client.Object {
			s := httpSync(ns, "sched", "https://cmdb.example.com/x", fleetv1alpha1.PolicySelector{CollectorIDs: []string{"a"}}, map[string]string{"k": "k"})
			s.Spec.Schedule = "61 * * * *"
			return s
		}(), "spec.schedule"},
		{"policy without selector", &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: fleetv1alpha1.RemoteAttributePolicySpec{Attributes: map[string]string{"k": "v"}}}, "spec.selector"},
		{"policy with reserved key", &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p2"},
			Spec: fleetv1alpha1.RemoteAttributePolicySpec{Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`a="b"`}},
				Attributes: map[string]string{"collector.os": "v"}}}, "reserved"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, tc.obj)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("admission webhook")))
		})
	}
}

// sqlSecret creates the Secret holding the DSN.
func sqlSecret(t *testing.T, ns, dsn string) {
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		StringData: map[string]string{fleetv1alpha1.SecretKeyDSN: dsn}})).To(Succeed())
}
