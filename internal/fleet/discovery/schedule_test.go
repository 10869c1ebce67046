package discovery

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestUntilDue(t *testing.T) {
	last := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	synced := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: fleetv1alpha1.ConditionSynced, Status: status, Reason: reason}}
	}
	cases := []struct {
		name  string
		st    fleetv1alpha1.DiscoveryStatus
		gen   int64
		now   time.Time
		wantD time.Duration
	}{
		{"never polled", fleetv1alpha1.DiscoveryStatus{}, 1, last, 0},
		{"spec changed", fleetv1alpha1.DiscoveryStatus{ObservedGeneration: 1, LastSyncTime: &metav1.Time{Time: last},
			Conditions: synced(metav1.ConditionTrue, "Synced")}, 2, last.Add(time.Second), 0},
		{"synced: wait the interval", fleetv1alpha1.DiscoveryStatus{ObservedGeneration: 1, LastSyncTime: &metav1.Time{Time: last},
			Conditions: synced(metav1.ConditionTrue, "Synced")}, 1, last.Add(time.Minute), 4 * time.Minute},
		{"due", fleetv1alpha1.DiscoveryStatus{ObservedGeneration: 1, LastSyncTime: &metav1.Time{Time: last},
			Conditions: synced(metav1.ConditionTrue, "Synced")}, 1, last.Add(6 * time.Minute), -time.Minute},
		{"failed: retry sooner", fleetv1alpha1.DiscoveryStatus{ObservedGeneration: 1, LastSyncTime: &metav1.Time{Time: last},
			Conditions: synced(metav1.ConditionFalse, "ListFailed")}, 1, last, FailureRetry},
		{"rate limited", fleetv1alpha1.DiscoveryStatus{ObservedGeneration: 1, LastSyncTime: &metav1.Time{Time: last},
			Conditions: synced(metav1.ConditionFalse, fleetv1alpha1.ReasonRateLimited)}, 1, last, RateLimitedRetry},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(UntilDue(&tc.st, tc.gen, 5*time.Minute, tc.now)).To(Equal(tc.wantD))
		})
	}
}

func TestPollInterval(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PollInterval(nil)).To(Equal(5 * time.Minute))
	g.Expect(PollInterval(&metav1.Duration{Duration: time.Second})).To(Equal(time.Minute))
	g.Expect(PollInterval(&metav1.Duration{Duration: time.Hour})).To(Equal(time.Hour))
}
