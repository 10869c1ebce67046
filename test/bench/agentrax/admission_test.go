package agentrax

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	agentraxwebhook "github.com/quartet-dev/quartet-operator/internal/webhook/agentrax"
)

// maxCASRatio is issue #26's goal: the webhook's own p99 answer time for a create at most 1.3 times the p99 of a
// bare compare-and-swap write of the same TenantQuota.
const maxCASRatio = 1.3

// admissionKey names one kind of admission answer.
type admissionKey struct {
	webhook string
	op      admissionv1.Operation
	dryRun  bool
}

// validatingCreate is the answer the goal is about: it makes the ledger write.
var validatingCreate = admissionKey{"validating", admissionv1.Create, false}

// probeInterval paces the second probe run: one round (a ConfigMap create, a label update, an agent create, a
// dry-run create, a TenantQuota label patch and a bare compare-and-swap) every 200 ms, i.e. 5 new agents a
// second, each with its 4 children and status written by the controllers in between.
var probeInterval = time.Duration(envInt("QUARTET_BENCH_PROBE_INTERVAL_MS", 200)) * time.Millisecond

// probeRun is one run of admission probes: the request latencies, the webhooks' exact answer times and the
// ledger's API calls during it.
type probeRun struct {
	lat                  []latencies
	answers              map[admissionKey][]time.Duration
	reads, written, lost float64
}

func runProbes(ctx context.Context, b *testing.B, nss []string, agents, probes int, interval time.Duration, prefix string) probeRun {
	b.Helper()
	ledger := func(call string) float64 { return counter(b, "agentrax_quota_ledger_calls_total", "call", call) }
	var r probeRun
	reads, written, lost := ledger("read"), ledger("write"), ledger("conflict")
	// Every answer the webhooks give during the probes, exactly as each handler timed it (the histogram's
	// buckets would only give interpolated quantiles). A handler records before it returns, so every probe's
	// answer is in when its request has returned.
	var mu sync.Mutex
	answers := map[admissionKey][]time.Duration{}
	stopped := false
	stop := agentraxwebhook.RecordAdmissionSamples(func(s agentraxwebhook.AdmissionSample) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			k := admissionKey{s.Webhook, s.Operation, s.DryRun}
			answers[k] = append(answers[k], s.Duration)
		}
	})
	r.lat = probeAdmission(ctx, b, nss, agents, probes, interval, prefix)
	stop()
	mu.Lock()
	stopped, r.answers = true, answers
	mu.Unlock()
	r.reads, r.written, r.lost = ledger("read")-reads, ledger("write")-written, ledger("conflict")-lost
	// Only the probes create agents now, so the validating creates are exactly theirs.
	if n := len(r.answers[validatingCreate]); n != probes {
		b.Fatalf("%d validating create answers recorded for %d probe creates", n, probes)
	}
	return r
}

// casRow is the bare compare-and-swap row of probeAdmission.
const casRow = 5

// p99s are the exact p99 of the webhook's own answer time for creates and of the bare compare-and-swap write,
// both timed by agentraxwebhook.Timed, over the samples of this run.
func (r probeRun) p99s() (webhook, cas time.Duration) {
	return quantile(r.answers[validatingCreate], .99), quantile(r.lat[casRow].lat, .99)
}

func (r probeRun) casRatio() float64 {
	webhook, cas := r.p99s()
	return float64(webhook) / float64(cas)
}

// checkCASRatio fails the benchmark when the webhook's p99 exceeds maxCASRatio times the bare write's.
func (r probeRun) checkCASRatio(b *testing.B, name string) {
	b.Helper()
	if ratio := r.casRatio(); ratio > maxCASRatio {
		webhook, cas := r.p99s()
		b.Errorf("%s: validating create p99 %s is %.2f× the bare compare-and-swap p99 %s (goal <= %.1f×)",
			name, ms(webhook), ratio, ms(cas), maxCASRatio)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func (r probeRun) print(title string, agents int) {
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
	fmt.Printf("admission time in the webhooks (exact, around each handler as agentrax_admission_duration_seconds\n")
	fmt.Printf("observes it: the API server also waits for the AdmissionReview coding and the loopback TLS round trip)\n")
	fmt.Printf("%-46s %-11s %8s %10s %10s %10s\n", "request", "webhook", "count", "p50", "p99", "<= 20 ms")
	rows := []struct {
		name string
		op   admissionv1.Operation
		dry  bool
	}{{"AgentDeployment create", admissionv1.Create, false},
		{"AgentDeployment update (probes and controllers)", admissionv1.Update, false},
		{"AgentDeployment dry-run create", admissionv1.Create, true}}
	for _, row := range rows {
		var sum99 time.Duration
		for _, wh := range []string{"mutating", "validating"} {
			d := r.answers[admissionKey{wh, row.op, row.dry}]
			sum99 += quantile(d, .99)
			fmt.Printf("%-46s %-11s %8d %10s %10s %9.1f%%\n", row.name, wh, len(d), ms(quantile(d, .5)), ms(quantile(d, .99)), 100*within(d, 20*time.Millisecond))
		}
		fmt.Printf("%-46s %-11s %8s %10s %10s\n", row.name, "both (p99 sum)", "", "", ms(sum99))
	}
	webhook, cas := r.p99s()
	fmt.Printf("validating create p99 (webhook's own answer time) %s vs bare compare-and-swap of the same TenantQuota "+
		"p99 %s (both exact, same timer, same client settings): %.2f× (goal <= %.1f×)\n", ms(webhook), ms(cas), r.casRatio(), maxCASRatio)
}

// within is the share of d at or below limit.
func within(d []time.Duration, limit time.Duration) float64 {
	n := 0
	for _, x := range d {
		if x <= limit {
			n++
		}
	}
	return float64(n) / float64(max(len(d), 1))
}
