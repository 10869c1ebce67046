package promreal

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
)

var thresholds = rollout.Thresholds{MaxErrorRate: 0.1, MaxP99: 500 * time.Millisecond, MinRequestSample: 20}

// TestAnalysisQueries evaluates the generated queries end to end: requests, error rate and p99 per variant, a
// 5xx spike and a latency spike on the canary only, an agent without traffic (no data, not an outage), a
// rejected query, and Prometheus stopped (unreachable).
func TestAnalysisQueries(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	stable, canary := newApp(t, "support-bot", "stable"), newApp(t, "support-bot", "canary")
	idle := newApp(t, "idle-bot", "canary")
	stable.set(0.02, 0.03)
	// 40 requests/s, half of them to the canary.
	tr := startTraffic(t, 40, stable, canary)
	tr.set(-1, 50)
	prom := startPrometheus(t, stable, canary, idle)
	p := prom.client()
	ctx := context.Background()
	m := rollout.Metrics{}
	const window = 10 * time.Second

	// Healthy: each variant's own error share and latency, the canary judged a pass. With buckets
	// 0.05/0.1/..., a 80 ms latency puts the p99 at 0.05 + 0.99×0.05 by linear interpolation.
	g.Eventually(func(g Gomega) {
		a := p.Analyze(ctx, m, canary.target(), window, time.Time{})
		g.Expect(a.Outcome).To(Equal(rollout.Measured), a.Err)
		g.Expect(a.Requests).To(BeNumerically("~", 200, 60))
		g.Expect(a.ErrorRate).To(BeNumerically("~", 0.05, 0.01))
		g.Expect(a.P99).To(BeNumerically("~", 0.0995, 0.0001))
		g.Expect(rollout.Judge(a, thresholds).Reason).To(Equal(rollout.ReasonAnalysisPassed))

		s := p.Analyze(ctx, m, stable.target(), window, time.Time{})
		g.Expect(s.Outcome).To(Equal(rollout.Measured), s.Err)
		g.Expect(s.ErrorRate).To(BeNumerically("~", 0.02, 0.01))
		g.Expect(s.P99).To(BeNumerically("~", 0.0495, 0.0001))
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	// A 5xx spike on the canary breaches maxErrorRate; the stable variant is unaffected.
	canary.set(0.3, 0.08)
	g.Eventually(func(g Gomega) {
		a := p.Analyze(ctx, m, canary.target(), window, time.Time{})
		g.Expect(a.ErrorRate).To(BeNumerically("~", 0.3, 0.05))
		v := rollout.Judge(a, thresholds)
		g.Expect(v.Reason).To(Equal(rollout.ReasonErrorRateExceeded))
		g.Expect(v.Message).To(MatchRegexp(`^error rate (2[5-9]|3[0-5])\.\d\d% over 10s \(\d+ requests\) exceeds maxErrorRate 10\.00%$`))
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	g.Expect(rollout.Judge(p.Analyze(ctx, m, stable.target(), window, time.Time{}), thresholds).Reason).
		To(Equal(rollout.ReasonAnalysisPassed))

	// A 600 ms latency spike breaches maxP99LatencyMs: p99 in the (0.5, 1] bucket.
	canary.set(0.05, 0.6)
	g.Eventually(func(g Gomega) {
		a := p.Analyze(ctx, m, canary.target(), window, time.Time{})
		g.Expect(a.P99).To(BeNumerically("~", 0.995, 0.001))
		g.Expect(rollout.Judge(a, thresholds).Reason).To(Equal(rollout.ReasonP99LatencyExceeded))
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	// An agent without traffic: zero requests, zero error rate, no p99 — measured, not unreachable, and not
	// judged (below the sample gate).
	g.Eventually(func(g Gomega) {
		a := p.Analyze(ctx, m, idle.target(), window, time.Time{})
		g.Expect(a.Outcome).To(Equal(rollout.Measured), a.Err)
		g.Expect(a.Requests).To(BeZero())
		g.Expect(a.ErrorRate).To(BeZero())
		g.Expect(isNaN(a.P99)).To(BeTrue())
		g.Expect(rollout.Judge(a, thresholds).Reason).To(Equal(rollout.ReasonBelowMinSample))
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	// A histogram name that does not exist (the upstream's _milliseconds) is no data, not an outage.
	ms := rollout.Metrics{DurationBucket: "http_request_duration_milliseconds_bucket"}
	a := p.Analyze(ctx, ms, canary.target(), window, time.Time{})
	g.Expect(a.Outcome).To(Equal(rollout.Measured), a.Err)
	g.Expect(isNaN(a.P99)).To(BeTrue())
	g.Expect(rollout.Judge(a, thresholds).Reason).To(Equal(rollout.ReasonLatencyNoData))

	// A malformed query is rejected as bad_data: a query error.
	_, err := p.Query(ctx, "sum(http_requests_total", time.Time{})
	var qe *rollout.QueryError
	g.Expect(errors.As(err, &qe)).To(BeTrue(), "got %v", err)
	g.Expect(qe.Type).To(Equal("bad_data"))

	// Label values with quotes, backslashes and newlines stay inside their matcher: Prometheus accepts the
	// query and finds no such agent.
	a = p.Analyze(ctx, m, rollout.Target{Namespace: "te\"am\\-a\n", Name: `x"}) or vector(1) #`, Variant: "canary"},
		window, time.Time{})
	g.Expect(a.Outcome).To(Equal(rollout.Measured), a.Err)
	g.Expect(a.Requests).To(BeZero())

	// Prometheus stopped: unreachable.
	prom.stop()
	a = p.Analyze(ctx, m, canary.target(), window, time.Time{})
	g.Expect(a.Outcome).To(Equal(rollout.Unreachable))
	g.Expect(a.Err).To(ContainSubstring("connection refused"))
}
