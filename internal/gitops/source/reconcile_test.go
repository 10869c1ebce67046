package source

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

func TestReconcileInterval(t *testing.T) {
	for _, tc := range []struct {
		value string
		set   bool
		want  time.Duration
		err   bool
	}{
		{set: false, want: DefaultReconcileInterval},
		{value: "", set: true, want: DefaultReconcileInterval},
		{value: "90s", set: true, want: 90 * time.Second},
		{value: "0", set: true, want: 0},
		{value: "-1m", set: true, err: true},
		{value: "ten minutes", set: true, err: true},
	} {
		g := NewWithT(t)
		cm := &corev1.ConfigMap{Data: map[string]string{}}
		if tc.set {
			cm.Data[DataReconcileInterval] = tc.value
		}
		got, err := ReconcileInterval(cm)
		if tc.err {
			g.Expect(err).To(MatchError(ContainSubstring(DataReconcileInterval)), tc.value)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), tc.value)
		g.Expect(got).To(Equal(tc.want), tc.value)
	}
}

func FuzzReconcileInterval(f *testing.F) {
	for _, s := range []string{"10m", "0", "-1s", "x", "1h30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ReconcileInterval(&corev1.ConfigMap{Data: map[string]string{DataReconcileInterval: s}})
		if err == nil && d < 0 {
			t.Fatalf("%q gave a negative interval %s", s, d)
		}
	})
}

func TestReconcileCommit(t *testing.T) {
	const deployed, latest, head = "d000", "e000", "h000"
	for _, tc := range []struct {
		name                 string
		deployed, latest     string
		head                 string
		wantCommit, wantKind string
	}{
		{name: "the head moved past the deployed commit: deploy it", deployed: deployed, latest: deployed, head: head,
			wantCommit: head, wantKind: EventPoll},
		{name: "the head is deployed: re-apply it (drift)", deployed: head, latest: head, head: head,
			wantCommit: head, wantKind: EventReconcile},
		{name: "a failed push is behind the head: the head wins", deployed: deployed, latest: latest, head: head,
			wantCommit: head, wantKind: EventPoll},
		{name: "never deployed: the head", head: head, wantCommit: head, wantKind: EventPoll},
		{name: "head unknown, the latest push failed: complete it, never revert", deployed: deployed, latest: latest,
			wantCommit: latest, wantKind: EventReconcile},
		{name: "head unknown, the latest push deployed: re-apply", deployed: deployed, latest: deployed,
			wantCommit: deployed, wantKind: EventReconcile},
		{name: "head unknown, never deployed: nothing", wantCommit: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cm := &corev1.ConfigMap{}
			cm.Annotations = map[string]string{}
			if tc.deployed != "" {
				cm.Annotations[pipeline.AnnotationDeployed] = tc.deployed
			}
			if tc.latest != "" {
				cm.Annotations[pipeline.AnnotationEventCommit] = tc.latest
			}
			commit, kind := reconcileCommit(cm, tc.head)
			g.Expect(commit).To(Equal(tc.wantCommit))
			if tc.wantCommit != "" {
				g.Expect(kind).To(Equal(tc.wantKind))
			}
		})
	}
}

func TestPollDue(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		interval  time.Duration
		since     time.Duration
		requested string
		handled   string
		want      bool
	}{
		{name: "interval not passed", interval: time.Minute, since: 30 * time.Second},
		{name: "interval and its jitter passed", interval: time.Minute, since: 67 * time.Second, want: true},
		{name: "polls off", interval: 0, since: time.Hour},
		{name: "reconcile requested", interval: 0, since: 0, requested: "2026-12-06T12:00:00Z", want: true},
		{name: "request already handled", interval: time.Hour, since: time.Minute, requested: "a", handled: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{}
			cm.Namespace, cm.Name = "team", "web"
			cm.Annotations = map[string]string{}
			if tc.requested != "" {
				cm.Annotations[AnnotationReconcileRequested] = tc.requested
			}
			if tc.handled != "" {
				cm.Annotations[AnnotationReconcileHandled] = tc.handled
			}
			NewWithT(t).Expect(pollDue(cm, tc.interval, now.Add(-tc.since), now)).To(Equal(tc.want))
		})
	}
}

func TestJitterStaysWithinATenthOfTheInterval(t *testing.T) {
	g := NewWithT(t)
	seen := map[time.Duration]bool{}
	for i := range 200 {
		j := jitter(fmt.Sprintf("ns/target-%d", i), 10*time.Minute)
		g.Expect(j).To(BeNumerically(">=", 0))
		g.Expect(j).To(BeNumerically("<", time.Minute))
		seen[j] = true
	}
	g.Expect(len(seen)).To(BeNumerically(">", 100), "targets are spread, not polled together")
	g.Expect(jitter("ns/x", 10*time.Minute)).To(Equal(jitter("ns/x", 10*time.Minute)), "stable per target")
}

// TestWaitForIsBounded: the source handler's drain ends at its bound even while an event still runs.
func TestWaitForIsBounded(t *testing.T) {
	g := NewWithT(t)
	h := &Handler{}
	h.inflight.Add(1)
	start := time.Now()
	g.Expect(h.WaitFor(100 * time.Millisecond)).To(BeFalse())
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	h.inflight.Done()
	g.Expect(h.WaitFor(time.Minute)).To(BeTrue())
}
