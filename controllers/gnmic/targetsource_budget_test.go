package gnmic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// spec.timeout bounds fetching only: an inventory that uses most of a 1s timeout to answer still gets its 300
// Targets written, because the writes have a budget of their own derived from the client QPS. When the timeout
// bounded the whole run, the writes were left a tenth of a second and the run failed (ApplyFailed, or
// PartialFailure when some writes fit in it).
func TestTargetSourceTimeoutBoundsFetchOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const devicesInInventory = 300
	results := make([]map[string]any, 0, devicesInInventory)
	for i := range devicesInInventory {
		results = append(results, map[string]any{"hostname": fmt.Sprintf("dev%03d", i), "mgmt_ip": fmt.Sprintf("dev%03d.example.net", i)})
	}
	// The stand-in inventory is slow on purpose, the way a large inventory API is: it answers inside the timeout.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(850 * time.Millisecond)
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	t.Cleanup(slow.Close)
	ts := httpSource(ns, "slow", slow.URL)
	ts.Spec.Timeout = &metav1.Duration{Duration: time.Second}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	got := waitReason(t, ns, "slow", gnmicv1alpha1.ReasonSucceeded)
	g.Expect(got.Status.Managed).To(Equal(int32(devicesInInventory)))
	g.Expect(targetsOf(g, ns, "slow")).To(HaveLen(devicesInInventory))
}

// A fetch that outlives spec.timeout still fails the run as a fetch failure: the timeout keeps bounding fetching.
func TestTargetSourceTimeoutStillBoundsFetch(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	stuck := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(stuck.Close)
	ts := httpSource(ns, "stuck", stuck.URL)
	ts.Spec.Timeout = &metav1.Duration{Duration: time.Second}
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	got := waitReason(t, ns, "stuck", gnmicv1alpha1.ReasonFetchFailed)
	g.Expect(got.Status.LastError).To(ContainSubstring("deadline exceeded"))
}
