package agentrax

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// A settled TenantQuota is counted again on the resync interval (5 minutes unless set), whatever events arrive:
// usage and the ledger are re-derived from what runs even if an event was lost (a watch that expired, a manager
// that restarted between a pod going and its event). Nothing pending sooner means the resync is the requeue.
func TestTenantQuotaResyncsPeriodically(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	NewWithT(t).Expect(agentraxv1alpha1.AddToScheme(scheme)).To(Succeed())
	tq := &agentraxv1alpha1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
		Spec: agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 0, MaxTotalReplicas: 20, MaxReplicasPerAgent: 10}}
	for name, tc := range map[string]struct {
		interval time.Duration
		want     time.Duration
	}{
		"default five minutes": {0, DefaultQuotaResync},
		"set interval":         {90 * time.Second, 90 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tq.DeepCopy()).
				WithStatusSubresource(&agentraxv1alpha1.TenantQuota{}).
				WithIndex(&agentraxv1alpha1.AgentDeployment{}, tenantRefField, tenantRefOf).Build()
			r := &TenantQuotaReconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10),
				GPUResource: "nvidia.com/gpu", ResyncInterval: tc.interval}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tq)}
			// The first pass writes the settled status; the second finds nothing to change.
			for range 2 {
				res, err := r.Reconcile(context.Background(), req)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.RequeueAfter).To(Equal(tc.want))
			}
			g.Expect(DefaultQuotaResync).To(Equal(5 * time.Minute))
		})
	}
}
