package pharos

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
)

// syntheticFailures are n events pharos gave up on, one per target, with realistic IDs and reasons.
func syntheticFailures(n int) []Event {
	now := time.Now().UTC().Truncate(time.Second)
	events := make([]Event, 0, n)
	for i := range n {
		var tid trace.TraceID
		copy(tid[:], fmt.Sprintf("%016x%016x", i*7919+1, i*104729+3))
		id := tid.String()
		events = append(events, Event{ID: id, Trace: fmt.Sprintf("%032x", i*15485863+11),
			Earlier: []string{fmt.Sprintf("%032x", i*32452843+5)},
			Address: "katastroma-source.katastroma-system.svc:50051", Tenant: fmt.Sprintf("team-%04d", i%250),
			State: GaveUp, Since: now.Add(-10 * time.Minute), Replays: 3, LastReplay: now.Add(-time.Minute),
			Reason: fmt.Sprintf("replay limit 3 reached; last failure: tenant-%04d/web-%d: pipeline: rpc error: code = "+
				"FailedPrecondition desc = the dry run refused 1 of 12 objects, nothing was applied: ConfigMap "+
				"tenant-%04d/doomed: admission webhook \"gate.example.com\" denied the request", i%250, i, i%250)})
	}
	return events
}

// TestFiveThousandTargetsFailuresSurviveARestart: the failures of 5,000 targets are saved in the state ConfigMap
// on the real API server and a restarted pharos has every one of them, reason included.
func TestFiveThousandTargetsFailuresSurviveARestart(t *testing.T) {
	g := NewWithT(t)
	key := types.NamespacedName{Namespace: "default", Name: "pharos-state-5000"}
	events := syntheticFailures(5000)
	g.Expect(len(mustEncode(g, events))).To(BeNumerically(">", 1<<20), "the state is larger than a ConfigMap holds")
	g.Expect((&ConfigMapPersister{Client: env.Client, Key: key}).Save(context.Background(), events)).To(Succeed())

	src := startFakeSource(t)
	o := testOptions(src.addr)
	o.Persister = &ConfigMapPersister{Client: env.Client, Key: key}
	p, _ := startPharos(t, o)
	restored := map[string]Event{}
	for _, e := range p.Events() {
		restored[e.ID] = e
	}
	g.Expect(restored).To(HaveLen(len(events)))
	for _, want := range events {
		got, ok := restored[want.ID]
		g.Expect(ok).To(BeTrue(), "event %s was lost", want.ID)
		g.Expect(got.State).To(Equal(GaveUp))
		g.Expect(got.Reason).To(Equal(want.Reason))
		g.Expect(got.Tenant).To(Equal(want.Tenant))
	}
	g.Expect(src.Calls()).To(BeEmpty(), "nothing given up is replayed")
}

func mustEncode(g Gomega, events []Event) string {
	s, err := encodeEvents(events)
	g.Expect(err).NotTo(HaveOccurred())
	return s
}
