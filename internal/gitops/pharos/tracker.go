// Package pharos is the gitops coordinator: an OTLP trace receiver that tracks events from the spans the stages
// export, replays failed events through the originating source handler's Replay RPC, and replays events that started
// but never finished (crash detection).
package pharos

import (
	"fmt"
	"time"
)

// State is where an event stands, as far as pharos knows.
type State string

// Event states.
const (
	// Running: spans of the event's current trace were seen (or a replay was just started) and the root `event`
	// span has not arrived; the crash timer runs from Since.
	Running State = "running"
	// Failed: a span of the current trace has status ERROR (or the crash timer fired); a replay is due at NextAt.
	Failed State = "failed"
	// Replaying: a Replay call is in flight.
	Replaying State = "replaying"
	// Done: the root span arrived without error. Kept until the retention passes so late spans are ignored.
	Done State = "done"
	// GaveUp: no more replays (limit reached, event unknown to the source handler, no address). Reason says why.
	GaveUp State = "gave-up"
	// Superseded: a newer event took the source target over (a span carried AttrSuperseded, or Replay answered
	// so). Final like Done: the newer event does the work, replaying the old commit would only be refused.
	Superseded State = "superseded"
)

// Config tunes the decisions. Zero fields take the defaults.
type Config struct {
	// CrashTimeout is how long an event may run without its root span arriving before it is replayed (default
	// 12m). Keep it above the source handler's lease-stale-after (10m): a crashed processor's lease blocks
	// replays until it is stale.
	CrashTimeout time.Duration
	// ReplayLimit is how many replays pharos asks for per event (default 3, the source handler's default too).
	ReplayLimit int
	// BackoffBase is the wait after the first replay before a second one (default 30s); it doubles per replay.
	BackoffBase time.Duration
	// BackoffMax caps the wait between replays of one event (default 10m).
	BackoffMax time.Duration
	// Retention is how long finished and given-up events are remembered (default 1h).
	Retention time.Duration
	// DefaultAddress is the source handler used when no span of the event names one (empty: none).
	DefaultAddress string
	// RootWait is how long a failure seen on a stage span waits for the event's root span before the replay
	// (0: replay at once). The source handler releases its leases before it ends the root span, so a replay made
	// earlier can be refused as "lease active" and use up one of the limited replays. The root span of a failed
	// event carries ERROR too, so it normally arrives within the export delay; the wait only bounds a lost root.
	RootWait time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.CrashTimeout, 12*time.Minute)
	def(&c.BackoffBase, 30*time.Second)
	def(&c.BackoffMax, 10*time.Minute)
	def(&c.Retention, time.Hour)
	if c.ReplayLimit <= 0 {
		c.ReplayLimit = 3
	}
	return c
}

// backoff is the minimum wait after the n-th replay (n ≥ 1) before the next one.
func (c Config) backoff(n int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < n && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// Span is what the tracker needs from one received span.
type Span struct {
	TraceID string // lowercase hex
	Root    bool   // the `event` span without a parent
	Error   bool   // status ERROR
	Message string // status message
	// Address is the source handler's gRPC address from the span or its resource (AttrSourceAddress).
	Address string
	// ReplayOf is the event a replay event re-runs (AttrReplayOf), when the source handler sets it.
	ReplayOf string
	// Superseded: the span ended because a newer event holds the lease (stage.AttrSuperseded).
	Superseded bool
	// Tenant is the event's tenant (AttrTenant), on the spans that carry it.
	Tenant string
}

// Event is one event pharos tracks, keyed by its original event ID (the trace ID of the first attempt). Replays
// run as new traces; Trace is the current attempt's, and spans of older attempts are ignored.
type Event struct {
	ID    string `json:"id"`
	Trace string `json:"trace"`
	// Earlier are the traces of earlier replays (the original is ID), so their late spans stay ignored.
	Earlier []string `json:"earlier,omitempty"`
	Address string   `json:"address,omitempty"`
	// Tenant is the tenant of the event, from the first span that named it (metrics are labelled with it).
	Tenant  string    `json:"tenant,omitempty"`
	State   State     `json:"state"`
	Since   time.Time `json:"since"`
	Replays int       `json:"replays"`
	// LastReplay is when the last Replay call was answered (started or refused).
	LastReplay time.Time `json:"lastReplay,omitzero"`
	NextAt     time.Time `json:"nextAt,omitzero"`
	Reason     string    `json:"reason,omitempty"`
	// ReplayOf is set on a replay's spans that arrived while pharos's Replay call for that event was in flight.
	ReplayOf string `json:"replayOf,omitempty"`
}

// Replay is a Replay call the tracker wants made.
type Replay struct {
	EventID string
	Address string
}

// Outcome classifies a Replay call's answer.
type Outcome int

// Outcomes of a Replay call.
const (
	// Started: the source handler started a replay as the new trace NewTrace.
	Started Outcome = iota
	// Refused: the lease rules refused (FailedPrecondition); counts as a replay.
	Refused
	// Unknown: the source handler does not know the event (NotFound, InvalidArgument); final.
	Unknown
	// Unreachable: transport or server trouble; retried after a backoff without counting.
	Unreachable
	// SupersededOutcome: a newer event superseded the event (stage.IsSuperseded); final, not counted.
	SupersededOutcome
	// Untrusted: the address is not one of the Platform's source handlers, so it was not dialed; final, not
	// counted.
	Untrusted
)

// Tracker decides, from spans and the clock, which events to replay. It is not safe for concurrent use; times are
// passed in so tests control the clock.
type Tracker struct {
	cfg    Config
	events map[string]*Event
	traces map[string]string // trace ID → event ID, for every attempt still remembered
	// OnGiveUp, when set, is told of every event that reaches GaveUp (for the metric and the log).
	OnGiveUp func(Event)
}

// NewTracker returns an empty tracker.
func NewTracker(cfg Config) *Tracker {
	return &Tracker{cfg: cfg.withDefaults(), events: map[string]*Event{}, traces: map[string]string{}}
}

// Restore loads events (from a persister), replacing what the tracker holds. A replay that was in flight when the
// state was saved is due again: the source handler refuses it if the first call did start one.
func (t *Tracker) Restore(events []Event) {
	t.events, t.traces = map[string]*Event{}, map[string]string{}
	for _, e := range events {
		if e.State == Replaying {
			e.State = Failed
		}
		t.events[e.ID] = &e
		for _, tr := range append([]string{e.ID, e.Trace}, e.Earlier...) {
			t.traces[tr] = e.ID
		}
	}
}

// Snapshot returns a copy of every event, for persisting and inspection.
func (t *Tracker) Snapshot() []Event {
	out := make([]Event, 0, len(t.events))
	for _, e := range t.events {
		out = append(out, *e)
	}
	return out
}

// Get returns one event.
func (t *Tracker) Get(id string) (Event, bool) {
	e, ok := t.events[id]
	if !ok {
		return Event{}, false
	}
	return *e, true
}

// Observe records one span. It reports whether the tracked state changed.
func (t *Tracker) Observe(now time.Time, s Span) bool {
	if s.TraceID == "" {
		return false
	}
	id, known := t.traces[s.TraceID]
	changed := false
	switch {
	case !known && s.ReplayOf != "" && t.events[s.ReplayOf] != nil && t.events[s.ReplayOf].State != Replaying:
		// A replay pharos did not ask for (manual, or one whose call timed out): it becomes the original
		// event's current attempt. While pharos's own call is in flight the span is kept apart instead, and
		// Result folds it in, so the replay is counted.
		id, changed = s.ReplayOf, true
		e := t.events[id]
		t.setTrace(e, s.TraceID)
		if e.State != GaveUp {
			e.State, e.Since = Running, now
		}
	case !known:
		// A replay of an event pharos never saw is still keyed by the original event: that is what the
		// source handler's Replay knows.
		id, changed = s.TraceID, true
		if s.ReplayOf != "" && t.events[s.ReplayOf] == nil {
			id = s.ReplayOf
		}
		t.events[id] = &Event{ID: id, Trace: s.TraceID, State: Running, Since: now}
		if id != s.ReplayOf {
			t.events[id].ReplayOf = s.ReplayOf
		}
		t.traces[id], t.traces[s.TraceID] = id, id
	}
	e := t.events[id]
	if s.Tenant != "" && e.Tenant == "" {
		e.Tenant, changed = s.Tenant, true
	}
	if e.Trace != s.TraceID || e.State == Done || e.State == GaveUp || e.State == Superseded {
		return changed
	}
	if s.Address != "" && s.Address != e.Address {
		e.Address, changed = s.Address, true
	}
	switch {
	case s.Superseded:
		e.State, e.Since, e.Reason = Superseded, now, "superseded by a newer event"
		return true
	case s.Error && e.State == Running:
		t.fail(now, e, s.Message)
		if !s.Root && e.State == Failed {
			e.NextAt = later(e.NextAt, now.Add(t.cfg.RootWait))
		}
		return true
	case s.Root && e.State == Failed && e.NextAt.After(now):
		// The attempt is over and its leases released: replay as soon as the backoff allows.
		e.NextAt = t.earliest(now, e)
		return true
	case s.Root && !s.Error && e.State == Running:
		e.State, e.Since, e.Reason = Done, now, ""
		return true
	}
	return changed
}

// fail marks e failed and schedules its replay: now for a first failure, otherwise after the backoff since the
// last replay; past the limit it gives up.
func (t *Tracker) fail(now time.Time, e *Event, reason string) {
	e.Reason = reason
	if e.Replays >= t.cfg.ReplayLimit {
		t.giveUp(now, e, fmt.Sprintf("replay limit %d reached; last failure: %s", t.cfg.ReplayLimit, reason))
		return
	}
	e.State, e.NextAt = Failed, t.earliest(now, e)
}

// earliest is when e may be replayed next: now for its first failure, otherwise after the backoff since the last
// replay.
func (t *Tracker) earliest(now time.Time, e *Event) time.Time {
	if e.Replays == 0 {
		return now
	}
	return later(now, e.LastReplay.Add(t.cfg.backoff(e.Replays)))
}

func (t *Tracker) giveUp(now time.Time, e *Event, reason string) {
	e.State, e.Since, e.Reason = GaveUp, now, reason
	if t.OnGiveUp != nil {
		t.OnGiveUp(*e)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Due advances the crash timers and retention at now and returns the replays to make; their events are Replaying
// until Result is called. The bool reports whether the tracked state changed.
func (t *Tracker) Due(now time.Time) ([]Replay, bool) {
	var out []Replay
	changed := false
	for id, e := range t.events {
		switch e.State {
		case Running:
			if now.Sub(e.Since) >= t.cfg.CrashTimeout {
				t.fail(now, e, fmt.Sprintf("crash: the event did not finish within %s", t.cfg.CrashTimeout))
				changed = true
			}
		case Failed:
			// An unreachable source handler is retried with the backoff, but not for ever.
			if now.Sub(e.Since) >= t.cfg.Retention {
				t.giveUp(now, e, fmt.Sprintf("still failing after %s: %s", t.cfg.Retention, e.Reason))
				changed = true
			}
		case Done, GaveUp, Superseded:
			if now.Sub(e.Since) >= t.cfg.Retention {
				t.forget(id)
				changed = true
			}
		}
		if e.State != Failed || now.Before(e.NextAt) {
			continue
		}
		addr := e.Address
		if addr == "" {
			addr = t.cfg.DefaultAddress
		}
		if addr == "" {
			t.giveUp(now, e, "no source handler address: "+e.Reason)
		} else {
			e.State = Replaying
			out = append(out, Replay{EventID: id, Address: addr})
		}
		changed = true
	}
	return out, changed
}

func (t *Tracker) forget(id string) {
	for tr, ev := range t.traces {
		if ev == id {
			delete(t.traces, tr)
		}
	}
	delete(t.events, id)
}

// setTrace makes tr the current attempt of e.
func (t *Tracker) setTrace(e *Event, tr string) {
	if e.Trace != e.ID && e.Trace != tr {
		e.Earlier = append(e.Earlier, e.Trace)
	}
	e.Trace = tr
	t.traces[tr] = e.ID
}

// Result records the answer to a Replay call made for id.
func (t *Tracker) Result(now time.Time, id string, o Outcome, newTrace, message string) {
	e := t.events[id]
	if e == nil || e.State != Replaying {
		return
	}
	if tr := t.earlyReplay(id); o != Started && tr != "" {
		// The call failed (e.g. timed out) but its replay's spans say it did start.
		o, newTrace = Started, tr
	}
	switch o {
	case Started:
		e.Replays++
		e.LastReplay, e.State, e.Since, e.Reason = now, Running, now, ""
		t.adopt(now, e, newTrace)
	case Refused:
		e.Replays++
		e.LastReplay = now
		e.State = Running // fail() needs a live state; it re-schedules with the backoff or gives up
		t.fail(now, e, "replay refused: "+message)
	case Unknown:
		t.giveUp(now, e, "replay impossible: "+message)
	case Untrusted:
		t.giveUp(now, e, "replay refused: "+message)
	case SupersededOutcome:
		e.State, e.Since, e.Reason = Superseded, now, message
	case Unreachable:
		e.State, e.Reason = Failed, "source handler unreachable: "+message
		e.NextAt = now.Add(t.cfg.backoff(e.Replays + 1))
	}
}

// earlyReplay returns the trace of a replay of id whose spans arrived while the Replay call was in flight.
func (t *Tracker) earlyReplay(id string) string {
	for _, e := range t.events {
		if e.ReplayOf == id {
			return e.Trace
		}
	}
	return ""
}

// adopt makes newTrace e's current attempt, folding in what its spans already said if they arrived before the
// Replay call returned.
func (t *Tracker) adopt(now time.Time, e *Event, newTrace string) {
	if newTrace == "" {
		return
	}
	early := t.events[newTrace]
	if early != nil && early.ID != e.ID {
		t.forget(newTrace)
	}
	t.setTrace(e, newTrace)
	if early == nil {
		return
	}
	if early.Address != "" {
		e.Address = early.Address
	}
	if e.Tenant == "" {
		e.Tenant = early.Tenant
	}
	switch early.State {
	case Done, Superseded:
		e.State, e.Since, e.Reason = early.State, now, early.Reason
	case Failed, Replaying, GaveUp:
		t.fail(now, e, early.Reason)
	}
}
