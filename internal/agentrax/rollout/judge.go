package rollout

import (
	"fmt"
	"math"
)

// Verdict is the judgement of one analysis against the thresholds.
type Verdict struct {
	Breached     bool
	Inconclusive bool
	Reason       string
	Message      string
}

// Judge applies the sample gate, then the thresholds. Below minRequestSample nothing is judged, not even a
// high error rate (few requests make percentages meaningless); NaN never passes.
func Judge(a Analysis, th Thresholds) Verdict {
	req := a.Requests
	if math.IsNaN(req) {
		req = 0
	}
	if req < float64(th.MinRequestSample) || req == 0 {
		return Verdict{Inconclusive: true, Reason: ReasonBelowMinSample, Message: fmt.Sprintf(
			"%.0f of %d required canary requests over %s", req, th.MinRequestSample, FormatDuration(a.Window))}
	}
	over := fmt.Sprintf("over %s (%.0f requests)", FormatDuration(a.Window), req)
	maxP99 := th.MaxP99.Seconds()
	switch {
	case a.ErrorRate > th.MaxErrorRate:
		return Verdict{Breached: true, Reason: ReasonErrorRateExceeded, Message: fmt.Sprintf(
			"error rate %s %s exceeds maxErrorRate %s", percent(a.ErrorRate), over, percent(th.MaxErrorRate))}
	case a.P99 > maxP99:
		return Verdict{Breached: true, Reason: ReasonP99LatencyExceeded, Message: fmt.Sprintf(
			"p99 latency %s %s exceeds maxP99LatencyMs %s", millis(a.P99), over, millis(maxP99))}
	case math.IsNaN(a.ErrorRate):
		return Verdict{Inconclusive: true, Reason: ReasonBelowMinSample,
			Message: "error rate has no data " + over}
	case math.IsNaN(a.P99):
		return Verdict{Inconclusive: true, Reason: ReasonLatencyNoData,
			Message: "p99 latency has no data " + over + " (is the latency histogram scraped?)"}
	}
	return Verdict{Reason: ReasonAnalysisPassed, Message: fmt.Sprintf("error rate %s ≤ %s, p99 %s ≤ %s %s",
		percent(a.ErrorRate), percent(th.MaxErrorRate), millis(a.P99), millis(maxP99), over)}
}

func percent(f float64) string { return fmt.Sprintf("%.2f%%", f*100) }

func millis(sec float64) string {
	if math.IsInf(sec, 1) {
		return "+Inf ms"
	}
	return fmt.Sprintf("%.0fms", sec*1000)
}
