package discovery

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Retry delays after a failed poll.
const (
	// FailureRetry follows a failed list (never later than the poll interval).
	FailureRetry = 30 * time.Second
	// RateLimitedRetry follows a 429.
	RateLimitedRetry = 10 * time.Second
)

// PollInterval is spec.pollInterval with the default for unset (or 0) and the minimum enforced.
func PollInterval(d *metav1.Duration) time.Duration {
	switch {
	case d == nil || d.Duration == 0:
		return fleetv1alpha1.DefaultPollInterval
	case d.Duration < fleetv1alpha1.MinPollInterval:
		return fleetv1alpha1.MinPollInterval
	}
	return d.Duration
}

// UntilDue is the skip rule: how long until the next poll, 0 (or less) when due now. A spec change is due at
// once; after a failed poll the retry comes sooner (RateLimitedRetry after a 429, FailureRetry otherwise), never
// later than the interval.
func UntilDue(st *fleetv1alpha1.DiscoveryStatus, generation int64, interval time.Duration, now time.Time) time.Duration {
	if st.LastSyncTime == nil || st.ObservedGeneration != generation {
		return 0
	}
	wait := interval
	if c := meta.FindStatusCondition(st.Conditions, fleetv1alpha1.ConditionSynced); c == nil || c.Status != metav1.ConditionTrue {
		retry := FailureRetry
		if c != nil && c.Reason == fleetv1alpha1.ReasonRateLimited {
			retry = RateLimitedRetry
		}
		wait = min(wait, retry)
	}
	return st.LastSyncTime.Add(wait).Sub(now)
}
