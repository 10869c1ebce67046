package targetsource

import "time"

// MaxBackoffFactor caps the retry delay at this many intervals.
const MaxBackoffFactor = 10

// JitterPercent is the largest jitter added to a delay, in percent of it.
const JitterPercent = 10

// RetryDelay is the delay before the next run: interval after a success (failures == 0), else interval doubled
// for each consecutive failure after the first, capped at 10× interval. rand returns a value in [0, 1) and adds
// 0–10% jitter on top, never subtracting.
func RetryDelay(interval time.Duration, failures int, rand func() float64) time.Duration {
	d := BaseDelay(interval, failures)
	if rand != nil {
		d += time.Duration(rand() * float64(d) * JitterPercent / 100)
	}
	return d
}

// BaseDelay is RetryDelay without jitter.
func BaseDelay(interval time.Duration, failures int) time.Duration {
	limit := interval * MaxBackoffFactor
	d := interval
	for i := 1; i < failures; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return d
}

// EffectiveTimeout is timeout capped at interval.
func EffectiveTimeout(timeout, interval time.Duration) time.Duration {
	if timeout <= 0 || timeout > interval {
		return interval
	}
	return timeout
}
