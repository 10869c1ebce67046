package gnmic

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The interval gauge is what the staleness alert compares the last-success age with (three intervals): it follows
// spec.interval, and a suspended or deleted TargetSource publishes none, so it cannot alert.
func TestTargetSourceIntervalGauge(t *testing.T) {
	g := NewWithT(t)
	recordTargetSourceInterval("lab", "netbox", 90*time.Second)
	g.Expect(testutil.ToFloat64(targetSourceInterval.WithLabelValues("lab", "netbox"))).To(Equal(90.0))
	recordTargetSourceInterval("lab", "netbox", 0) // suspended
	g.Expect(testutil.CollectAndCount(targetSourceInterval)).To(BeZero())
	recordTargetSourceInterval("lab", "netbox", time.Minute)
	forgetTargetSourceMetrics("lab", "netbox")
	g.Expect(testutil.CollectAndCount(targetSourceInterval)).To(BeZero())
}
