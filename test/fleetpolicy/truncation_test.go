// Package fleetpolicy checks RemoteAttributePolicy at a scale the shared fleet suite cannot afford: more than
// 1000 matching Collectors. Only the fleet-remoteattributepolicy controller runs (it makes no Fleet call), so
// the Collectors need no Fleet server.
package fleetpolicy

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/fleet"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{Controllers: []string{fleet.RemoteAttributePolicyControllerName}}))
}

// TestMatchedIDsAreCappedAt1000: 1001 matching Collectors give matchedCount 1001, the first 1000 IDs sorted, and
// Truncated=True/MatchedIDsTruncated; deleting one brings the list back whole and Truncated=False.
func TestMatchedIDsAreCappedAt1000(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "policy-scale"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	n := fleetv1alpha1.MaxMatchedCollectorIDs + 1
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		ids[i] = fmt.Sprintf("edge-%04d", i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- env.Client.Create(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ids[i]},
				Spec: fleetv1alpha1.CollectorSpec{ID: ids[i], RemoteAttributes: map[string]string{"fleet": "edge"}}})
		}(i)
		if i%20 == 19 {
			wg.Wait() // 20 creates in flight at a time: the API server is shared with the rest of the machine
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	// One Collector outside the selector.
	g.Expect(env.Client.Create(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "core"},
		Spec: fleetv1alpha1.CollectorSpec{ID: "core-1", RemoteAttributes: map[string]string{"fleet": "core"}}})).To(Succeed())

	p := &fleetv1alpha1.RemoteAttributePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edges"},
		Spec: fleetv1alpha1.RemoteAttributePolicySpec{Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`fleet="edge"`}},
			Attributes: map[string]string{"tier": "edge"}}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	sort.Strings(ids)
	get := func(g Gomega) *fleetv1alpha1.RemoteAttributePolicy {
		got := &fleetv1alpha1.RemoteAttributePolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		return got
	}
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.MatchedCount).To(BeEquivalentTo(n))
		g.Expect(got.Status.MatchedCollectorIDs).To(Equal(ids[:fleetv1alpha1.MaxMatchedCollectorIDs]))
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionTruncated)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(fleetv1alpha1.ReasonMatchedIDsTruncated))
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ids[n-1]}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.MatchedCount).To(BeEquivalentTo(n - 1))
		g.Expect(got.Status.MatchedCollectorIDs).To(Equal(ids[:n-1]))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionTruncated)).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())
}
