package agentrax

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// admissionKey names one series of agentrax_admission_duration_seconds.
type admissionKey struct{ webhook, operation, dryRun string }

// buckets are a histogram's cumulative counts by upper bound, in bound order, plus its sample count.
type buckets struct {
	bounds []float64
	counts []uint64
	total  uint64
}

// admissionTimes reads agentrax_admission_duration_seconds from the manager's registry (it runs in this process).
func admissionTimes(b *testing.B) map[admissionKey]buckets {
	b.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[admissionKey]buckets{}
	for _, f := range families {
		if f.GetName() != "agentrax_admission_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var k admissionKey
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "webhook":
					k.webhook = l.GetValue()
				case "operation":
					k.operation = l.GetValue()
				case "dry_run":
					k.dryRun = l.GetValue()
				}
			}
			h := m.GetHistogram()
			var bs buckets
			for _, bk := range h.GetBucket() {
				bs.bounds = append(bs.bounds, bk.GetUpperBound())
				bs.counts = append(bs.counts, bk.GetCumulativeCount())
			}
			bs.total = h.GetSampleCount()
			out[k] = bs
		}
	}
	return out
}

// since is what was observed between before and a.
func (a buckets) since(before buckets) buckets {
	out := buckets{bounds: a.bounds, counts: make([]uint64, len(a.counts)), total: a.total - before.total}
	for i := range a.counts {
		out.counts[i] = a.counts[i]
		if i < len(before.counts) {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

// quantile interpolates linearly inside the bucket holding the q-th observation (the buckets are 0.5–2.5 ms
// wide below 30 ms); +Inf when it lies beyond the last bound.
func (a buckets) quantile(q float64) float64 {
	if a.total == 0 {
		return math.NaN()
	}
	rank := q * float64(a.total)
	lower, below := 0.0, uint64(0)
	for i, c := range a.counts {
		if float64(c) >= rank {
			if c == below {
				return a.bounds[i]
			}
			return lower + (a.bounds[i]-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = a.bounds[i], c
	}
	return math.Inf(1)
}

// within is the share of observations at or below bound (a bucket bound, so exact).
func (a buckets) within(bound float64) float64 {
	for i, ub := range a.bounds {
		if ub == bound {
			return float64(a.counts[i]) / float64(a.total)
		}
	}
	return math.NaN()
}

// printAdmissionTimes prints the webhooks' own answer times for the probes.
func printAdmissionTimes(before, after map[admissionKey]buckets) {
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }
	fmt.Printf("admission time in the webhooks (agentrax_admission_duration_seconds, around each handler: the API server\n")
	fmt.Printf("also waits for its AdmissionReview encoding, the loopback TLS round trip and the envelope decode)\n")
	fmt.Printf("%-36s %-11s %8s %10s %10s %10s\n", "request", "webhook", "count", "p50", "p99", "<= 20 ms")
	rows := []struct {
		name string
		op   string
		dry  string
	}{{"AgentDeployment create", "CREATE", "false"}, {"AgentDeployment label update", "UPDATE", "false"}, {"AgentDeployment dry-run create", "CREATE", "true"}}
	for _, row := range rows {
		var sum99 float64
		for _, wh := range []string{"mutating", "validating"} {
			k := admissionKey{wh, row.op, row.dry}
			d := after[k].since(before[k])
			sum99 += d.quantile(.99)
			fmt.Printf("%-36s %-11s %8d %10s %10s %9.1f%%\n", row.name, wh, d.total, ms(d.quantile(.5)), ms(d.quantile(.99)), 100*d.within(.02))
		}
		fmt.Printf("%-36s %-11s %8s %10s %10s\n", row.name, "both (p99 sum)", "", "", ms(sum99))
	}
}

// probeInterval paces the second probe run: one round (a ConfigMap create, a label update, an agent create, a
// dry-run create and a TenantQuota label patch) every 200 ms, i.e. 5 new agents a second, each with its 4
// children and status written by the controllers in between.
var probeInterval = time.Duration(envInt("QUARTET_BENCH_PROBE_INTERVAL_MS", 200)) * time.Millisecond

// probeRun is one run of admission probes: the request latencies, the webhooks' own times and the ledger's
// API calls during it.
type probeRun struct {
	lat                  []latencies
	before, after        map[admissionKey]buckets
	reads, written, lost float64
}

func runProbes(ctx context.Context, b *testing.B, nss []string, agents, probes int, interval time.Duration, prefix string) probeRun {
	b.Helper()
	ledger := func(call string) float64 { return counter(b, "agentrax_quota_ledger_calls_total", "call", call) }
	var r probeRun
	reads, written, lost := ledger("read"), ledger("write"), ledger("conflict")
	r.before = admissionTimes(b)
	r.lat = probeAdmission(ctx, b, nss, agents, probes, interval, prefix)
	r.after = admissionTimes(b)
	r.reads, r.written, r.lost = ledger("read")-reads, ledger("write")-written, ledger("conflict")-lost
	return r
}

func (r probeRun) webhooks(k admissionKey) buckets { return r.after[k].since(r.before[k]) }

func (r probeRun) print(title string, agents int) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	ratio := func(a, base time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(base)) }
	fmt.Printf("\nadmission with %d agents present — %s\n", agents, title)
	fmt.Printf("%-52s %10s %10s %10s %10s\n", "request (client-side, whole request)", "p50", "p99", "p50 ratio", "p99 ratio")
	base := r.lat[0].lat
	for _, row := range r.lat {
		fmt.Printf("%-52s %10s %10s %10s %10s\n", row.name, ms(quantile(row.lat, .5)), ms(quantile(row.lat, .99)),
			ratio(quantile(row.lat, .5), quantile(base, .5)), ratio(quantile(row.lat, .99), quantile(base, .99)))
	}
	fmt.Printf("ledger calls (%d creates + %d dry runs): %.0f writes, %.0f lost writes, %.0f reads\n",
		len(base), len(base), r.written, r.lost, r.reads)
	printAdmissionTimes(r.before, r.after)
	create := admissionKey{"validating", "CREATE", "false"}
	cas := r.cas(create)
	fmt.Printf("validating create p99 (webhook's own time) %.1f ms vs bare compare-and-swap of the same TenantQuota p99 "+
		"%.1f ms (same buckets, same interpolation): %.2f× (goal <= 1.3×)\n",
		r.webhooks(create).quantile(.99)*1000, cas.quantile(.99)*1000, r.casRatio(create))
}

// cas is the bare compare-and-swap row (the last probe row) in the buckets of the webhook histogram k, so
// both p99s are computed the same way.
func (r probeRun) cas(k admissionKey) buckets {
	lat := r.lat[len(r.lat)-1].lat
	bs := buckets{bounds: r.after[k].bounds, counts: make([]uint64, len(r.after[k].bounds)), total: uint64(len(lat))}
	for _, d := range lat {
		for i, ub := range bs.bounds {
			if d.Seconds() <= ub {
				bs.counts[i]++
			}
		}
	}
	return bs
}

// casRatio is the webhook's p99 over the bare compare-and-swap p99 (the goal: at most 1.3).
func (r probeRun) casRatio(k admissionKey) float64 {
	return r.webhooks(k).quantile(.99) / r.cas(k).quantile(.99)
}
