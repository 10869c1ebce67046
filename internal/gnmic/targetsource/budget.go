package targetsource

import "time"

// writeBudgetFloor is the least time the write phase of a run gets, for the List and a few writes under load.
const writeBudgetFloor = time.Minute

// clientGoDefaultQPS is what client-go uses when a rest.Config leaves QPS unset.
const clientGoDefaultQPS = 5

// WriteBudget is how long the write phase of a run (Target applies and deletes) may take. spec.timeout bounds
// only the fetch: the writes go through the client's rate limiter, so their duration follows from their number
// and the QPS, not from how fast the inventory answers. The budget is twice the time the rate limiter alone
// needs (room for API server latency) plus a floor; 10,000 writes at the default 50 QPS get 7m40s.
func WriteBudget(writes int, qps float64) time.Duration {
	if qps <= 0 {
		qps = clientGoDefaultQPS
	}
	return writeBudgetFloor + time.Duration(2*float64(writes)/qps*float64(time.Second))
}

// SharedWriteBudget is WriteBudget for a run whose writes share the writer's rate limiter with up to sharers-1
// other runs at once (the controller's --targetsource-concurrency): the limiter serves their writes interleaved,
// so in the worst case this run writes at qps/sharers, and its budget is sized for that share. A run alone finishes
// early; the budget is a deadline, not a wait.
func SharedWriteBudget(writes int, qps float64, sharers int) time.Duration {
	if qps <= 0 {
		qps = clientGoDefaultQPS
	}
	return WriteBudget(writes, qps/float64(max(sharers, 1)))
}
