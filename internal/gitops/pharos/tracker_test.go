package pharos

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// step is one thing that happens to a tracker at offset `at` from the start of a case: a span arrives, the loop
// asks what is due (expecting exactly the listed event IDs), or a Replay call answers.
type step struct {
	at      time.Duration
	span    *Span
	due     []string
	result  *result
	restore bool // snapshot and restore into a fresh tracker (a pharos restart)
}

type result struct {
	id       string
	outcome  Outcome
	newTrace string
	msg      string
}

const (
	evA = "0af7651916cd43dd8448eb211c80319c"
	evB = "4bf92f3577b34da6a3ce929d0e0e4736"
	rp1 = "11111111111111111111111111111111"
	rp2 = "22222222222222222222222222222222"
	rp3 = "33333333333333333333333333333333"
)

func span(trace string, mods ...func(*Span)) *Span {
	s := &Span{TraceID: trace, Address: "source:50051"}
	for _, m := range mods {
		m(s)
	}
	return s
}

func root(s *Span)       { s.Root = true }
func failed(s *Span)     { s.Error, s.Message = true, "provisioner: denied" }
func noAddr(s *Span)     { s.Address = "" }
func superseded(s *Span) { s.Superseded = true }

func TestTracker(t *testing.T) {
	cfg := Config{CrashTimeout: time.Minute, ReplayLimit: 2, BackoffBase: 10 * time.Second,
		BackoffMax: 15 * time.Second, Retention: time.Hour}
	cases := []struct {
		name    string
		cfg     Config
		steps   []step
		id      string
		state   State
		replays int
		reason  string
	}{
		{name: "finished event needs nothing", id: evA, state: Done, steps: []step{
			{span: span(evA)}, {at: time.Second, span: span(evA, root)}, {at: 2 * time.Minute, due: nil}}},
		{name: "ERROR span replays once although several spans fail", id: evA, state: Replaying, steps: []step{
			{span: span(evA, failed)}, {span: span(evA, failed, root)}, {due: []string{evA}}, {span: span(evA, failed)},
			{at: time.Second, due: nil}}},
		{name: "replay that succeeds finishes the event", id: evA, state: Done, replays: 1, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Started, rp1, ""}},
			{at: time.Second, span: span(rp1, root)}, {at: 2 * time.Minute, due: nil}}},
		{name: "late spans of the failed attempt are ignored", id: evA, state: Running, replays: 1, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Started, rp1, ""}},
			{at: time.Second, span: span(evA, failed)}, {at: 2 * time.Second, due: nil}}},
		{name: "a stage failure waits for the root span", id: evA, state: Replaying,
			cfg: Config{CrashTimeout: time.Minute, ReplayLimit: 2, RootWait: 30 * time.Second}, steps: []step{
				{span: span(evA, failed)}, {at: time.Second, due: nil}, {at: 2 * time.Second, span: span(evA, failed, root)},
				{at: 2 * time.Second, due: []string{evA}}}},
		{name: "a lost root span delays the replay by the root wait only", id: evA, state: Replaying,
			cfg: Config{CrashTimeout: time.Minute, ReplayLimit: 2, RootWait: 30 * time.Second}, steps: []step{
				{span: span(evA, failed)}, {at: 29 * time.Second, due: nil}, {at: 30 * time.Second, due: []string{evA}}}},
		{name: "crash timeout replays an unfinished event", id: evA, state: Replaying, steps: []step{
			{span: span(evA)}, {at: 59 * time.Second, due: nil}, {at: time.Minute, due: []string{evA}}}},
		{name: "a second failure waits for the backoff", id: evA, state: Replaying, replays: 1, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Started, rp1, ""}},
			{at: time.Second, span: span(rp1, failed, root)}, {at: 9 * time.Second, due: nil},
			{at: 10 * time.Second, due: []string{evA}}}},
		{name: "replay limit stops with a reason", id: evA, state: GaveUp, replays: 2,
			reason: "replay limit 2 reached; last failure: provisioner: denied", steps: []step{
				{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Started, rp1, ""}},
				{span: span(rp1, failed)}, {at: 10 * time.Second, due: []string{evA}},
				{at: 10 * time.Second, result: &result{evA, Started, rp2, ""}},
				{at: 11 * time.Second, span: span(rp2, failed)}, {at: time.Hour, due: nil}}},
		{name: "refusals count and back off", id: evA, state: GaveUp, replays: 2,
			reason: "replay refused: lease active", steps: []step{
				{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Refused, "", "lease active"}},
				{at: 9 * time.Second, due: nil}, {at: 10 * time.Second, due: []string{evA}},
				{at: 10 * time.Second, result: &result{evA, Refused, "", "lease active"}}}},
		{name: "unknown event is final", id: evA, state: GaveUp, reason: "replay impossible: no source target", steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Unknown, "", "no source target"}},
			{at: time.Minute, due: nil}}},
		{name: "an untrusted address is final and not counted", id: evA, state: GaveUp,
			reason: "replay refused: source handler \"evil:50051\" is not one of", steps: []step{
				{span: span(evA, failed)}, {due: []string{evA}},
				{result: &result{evA, Untrusted, "", `source handler "evil:50051" is not one of the Platform's source handlers`}},
				{at: time.Hour - time.Second, due: nil}}},
		{name: "unreachable source handler is retried without counting", id: evA, state: Replaying, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Unreachable, "", "Unavailable"}},
			{at: 9 * time.Second, due: nil}, {at: 10 * time.Second, due: []string{evA}}}},
		{name: "unreachable for the whole retention gives up", id: evA, state: GaveUp,
			reason: "still failing after 1h0m0s: source handler unreachable: Unavailable", steps: []step{
				{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Unreachable, "", "Unavailable"}},
				{at: 59 * time.Minute, due: []string{evA}},
				{at: 59 * time.Minute, result: &result{evA, Unreachable, "", "Unavailable"}}, {at: time.Hour, due: nil}}},
		{name: "no address and no default gives up", id: evA, state: GaveUp, reason: "no source handler address", steps: []step{
			{span: span(evA, failed, noAddr)}, {due: nil}}},
		{name: "default address is used when spans carry none", id: evA, state: Replaying,
			cfg: Config{DefaultAddress: "source.katastroma:50051"}, steps: []step{
				{span: span(evA, failed, noAddr)}, {due: []string{evA}}}},
		{name: "spans of the replay before the call returned are folded in", id: evA, state: Done, replays: 1, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {span: span(rp1, root)},
			{result: &result{evA, Started, rp1, ""}}, {at: 2 * time.Minute, due: nil}}},
		{name: "replay_of attribute links a replay pharos did not start", id: evA, state: Done, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Unreachable, "", "down"}},
			{at: time.Second, span: span(rp3, root, func(s *Span) { s.ReplayOf = evA })}, {at: time.Minute, due: nil}}},
		{name: "a replay failing before its call returned is still counted", id: evA, state: GaveUp, replays: 2, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {span: span(rp1, failed, func(s *Span) { s.ReplayOf = evA })},
			{result: &result{evA, Started, rp1, ""}}, {at: 10 * time.Second, due: []string{evA}},
			{at: 10 * time.Second, span: span(rp2, failed, func(s *Span) { s.ReplayOf = evA })},
			{at: 10 * time.Second, result: &result{evA, Started, rp2, ""}}, {at: time.Hour, due: nil}}},
		{name: "a Replay call that timed out but started is recognised from replay_of", id: evA, state: Done, replays: 1,
			steps: []step{
				{span: span(evA, failed)}, {due: []string{evA}}, {span: span(rp1, root, func(s *Span) { s.ReplayOf = evA })},
				{result: &result{evA, Unreachable, "", "DeadlineExceeded"}}, {at: time.Minute, due: nil}}},
		{name: "replay of an event pharos never saw is keyed by that event", id: evB, state: Replaying, steps: []step{
			{span: span(rp1, failed, func(s *Span) { s.ReplayOf = evB })}, {due: []string{evB}}}},
		{name: "restart keeps a running event and its crash timer", id: evA, state: Replaying, steps: []step{
			{span: span(evA)}, {at: 30 * time.Second, restore: true}, {at: 59 * time.Second, due: nil},
			{at: time.Minute, due: []string{evA}}}},
		{name: "restart during a replay call makes it due again", id: evA, state: Replaying, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {restore: true}, {at: time.Second, due: []string{evA}}}},
		{name: "restart keeps earlier attempts ignored", id: evA, state: Done, replays: 2, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Started, rp1, ""}},
			{span: span(rp1, failed)}, {at: 10 * time.Second, due: []string{evA}},
			{at: 10 * time.Second, result: &result{evA, Started, rp2, ""}}, {at: 11 * time.Second, restore: true},
			{at: 12 * time.Second, span: span(rp1, failed)}, {at: 13 * time.Second, span: span(rp2, root)}}},
		{name: "retention forgets finished events", id: evA, state: "", steps: []step{
			{span: span(evA, root)}, {at: time.Hour, due: nil}}},
		{name: "a superseded replay answer is final and not counted", id: evA, state: Superseded,
			reason: "superseded by a newer event", steps: []step{
				{span: span(evA, failed)}, {due: []string{evA}},
				{result: &result{evA, SupersededOutcome, "", "superseded by a newer event"}}, {at: time.Hour - time.Second, due: nil}}},
		{name: "a superseded attempt ends the event without a replay", id: evA, state: Superseded, steps: []step{
			{span: span(evA, superseded)}, {span: span(evA, root)}, {at: 2 * time.Minute, due: nil}}},
		{name: "a superseded replay ends the event", id: evA, state: Superseded, replays: 1, steps: []step{
			{span: span(evA, failed)}, {due: []string{evA}}, {result: &result{evA, Started, rp1, ""}},
			{at: time.Second, span: span(rp1, superseded)}, {at: time.Second, span: span(rp1, root)},
			{at: 2 * time.Minute, due: nil}}},
		{name: "other events are independent", id: evB, state: Running, steps: []step{
			{span: span(evA, failed)}, {span: span(evB)}, {due: []string{evA}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := cfg
			if tc.cfg != (Config{}) {
				c = tc.cfg
			}
			tr := NewTracker(c)
			gaveUp := 0
			tr.OnGiveUp = func(Event) { gaveUp++ }
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, s := range tc.steps {
				now := start.Add(s.at)
				switch {
				case s.span != nil:
					tr.Observe(now, *s.span)
				case s.result != nil:
					tr.Result(now, s.result.id, s.result.outcome, s.result.newTrace, s.result.msg)
				case s.restore:
					saved := tr.Snapshot()
					onGiveUp := tr.OnGiveUp
					tr = NewTracker(c)
					tr.Restore(saved)
					tr.OnGiveUp = onGiveUp
				default:
					due, _ := tr.Due(now)
					var ids []string
					for _, r := range due {
						ids = append(ids, r.EventID)
					}
					g.Expect(ids).To(ConsistOf(s.due), "step %d", i)
				}
			}
			e, _ := tr.Get(tc.id)
			g.Expect(e.State).To(Equal(tc.state))
			g.Expect(e.Replays).To(Equal(tc.replays))
			g.Expect(e.Reason).To(ContainSubstring(tc.reason))
			if tc.state == GaveUp {
				g.Expect(gaveUp).To(Equal(1), "giving up is reported once")
			}
		})
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	g := NewWithT(t)
	c := Config{BackoffBase: time.Second, BackoffMax: 5 * time.Second}.withDefaults()
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, c.backoff(n))
	}
	g.Expect(got).To(Equal([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}))
}

// TestTrackerKeepsTheTenant: the tenant comes from whichever span of the event names it (the source handler's
// `event.started` usually arrives after a stage span), and a replay keeps it.
func TestTrackerKeepsTheTenant(t *testing.T) {
	g := NewWithT(t)
	tr := NewTracker(Config{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tenant := func(s *Span) { s.Tenant = "team-a" }
	tr.Observe(now, *span(evA))
	e, _ := tr.Get(evA)
	g.Expect(e.Tenant).To(BeEmpty())
	g.Expect(tr.Observe(now, *span(evA, tenant))).To(BeTrue(), "learning the tenant is a change to save")
	tr.Observe(now, *span(evA, failed))
	due, _ := tr.Due(now)
	g.Expect(due).To(HaveLen(1))
	tr.Result(now, evA, Started, rp1, "")
	tr.Observe(now, *span(rp1, root, func(s *Span) { s.Tenant = "someone-else" }))
	e, _ = tr.Get(evA)
	g.Expect(e.State).To(Equal(Done))
	g.Expect(e.Tenant).To(Equal("team-a"), "the first tenant named stays")
}
