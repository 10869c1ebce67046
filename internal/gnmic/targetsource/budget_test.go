package targetsource

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The write phase has a budget of its own, derived from the client's rate limit: spec.timeout bounds fetching
// only. The 10,000-device first sync at the manager's default QPS (50) is the case that used to time out.
func TestWriteBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes int
		qps    float64
		atLeast,
		atMost time.Duration
	}{
		{"nothing to write still gets the floor", 0, 50, time.Minute, time.Minute},
		{"10,000 devices at the default QPS", 10000, 50, 10000 / 50 * time.Second * 3 / 2, 10 * time.Minute},
		{"10,000 devices at a low QPS", 10000, 5, 10000 / 5 * time.Second * 3 / 2, 2 * time.Hour},
		{"unset QPS is client-go's default of 5", 100, 0, 100 / 5 * time.Second, 2 * time.Minute},
		{"a high QPS keeps the floor", 100, 1000, time.Minute, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := WriteBudget(tc.writes, tc.qps)
			g.Expect(got).To(BeNumerically(">=", tc.atLeast))
			g.Expect(got).To(BeNumerically("<=", tc.atMost))
		})
	}
}

// The fetch phase keeps spec.timeout (capped at the interval); it is no longer shared with the writes.
func TestEffectiveTimeoutIsTheFetchBudget(t *testing.T) {
	g := NewWithT(t)
	g.Expect(EffectiveTimeout(time.Minute, 5*time.Minute)).To(Equal(time.Minute))
	g.Expect(EffectiveTimeout(10*time.Minute, 5*time.Minute)).To(Equal(5 * time.Minute))
	g.Expect(WriteBudget(10000, 50)).To(BeNumerically(">", EffectiveTimeout(time.Minute, 5*time.Minute)))
}

// Concurrent runs share one writer and its rate limiter: four 10,000-device syncs at 50 QPS each write at about
// 12.5 QPS, so each run's budget must cover its writes at its share of the rate, or every one of them times out
// and converges only through backed-off retries.
func TestSharedWriteBudgetCoversEachRunsShare(t *testing.T) {
	g := NewWithT(t)
	alone := SharedWriteBudget(10000, 50, 1)
	g.Expect(alone).To(Equal(WriteBudget(10000, 50)))
	shared := SharedWriteBudget(10000, 50, 4)
	g.Expect(shared).To(BeNumerically(">=", 4*10000/50*time.Second), "the time the limiter needs for four runs' writes")
	g.Expect(shared).To(BeNumerically("<=", 30*time.Minute))
	g.Expect(SharedWriteBudget(100, 0, 0)).To(Equal(WriteBudget(100, 0)), "unset values keep their defaults")
}
