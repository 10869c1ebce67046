package collector

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Monitor follows the health of every collector pod of every Cluster: one SSE stream per pod with reconnect
// backoff, and a periodic poll of GET /api/v1/targets that corrects anything the stream missed.
type Monitor struct {
	Client *Client
	// PollInterval between polls of /api/v1/targets (default 15s).
	PollInterval time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff (defaults 2s and 10s).
	BackoffMin, BackoffMax time.Duration
	// Changed is called (outside any lock) when a cluster's reported states changed.
	Changed func(cluster types.NamespacedName)
	// Dropped is called when an established stream of a pod ends: the collector may have restarted and lost its
	// configuration.
	Dropped func(cluster types.NamespacedName, pod int)

	mu       sync.Mutex
	clusters map[types.NamespacedName]map[int]*podWatch
}

type podWatch struct {
	url    string
	cancel context.CancelFunc
	mu     sync.Mutex
	states map[string]TargetState
	known  bool
	// expected are the targets of the pod's last applied plan (nil: none told yet), since expectedAt.
	expected   map[string]bool
	expectedAt time.Time
}

// Expect tells the monitor which targets a pod was last configured with. A poll at least one interval later that
// finds the pod holding another set (a collector restarted empty, or a plan lost) calls Dropped, so the pod gets
// its plan again.
func (m *Monitor) Expect(cluster types.NamespacedName, pod int, targets []string) {
	m.mu.Lock()
	w := m.clusters[cluster][pod]
	m.mu.Unlock()
	if w == nil {
		return
	}
	want := make(map[string]bool, len(targets))
	for _, t := range targets {
		want[t] = true
	}
	w.mu.Lock()
	w.expected, w.expectedAt = want, time.Now()
	w.mu.Unlock()
}

// Ensure makes the monitor follow exactly the given pods (index → base URL) of a cluster.
func (m *Monitor) Ensure(cluster types.NamespacedName, urls map[int]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clusters == nil {
		m.clusters = map[types.NamespacedName]map[int]*podWatch{}
	}
	pods := m.clusters[cluster]
	if pods == nil {
		pods = map[int]*podWatch{}
		m.clusters[cluster] = pods
	}
	for i, w := range pods {
		if url, ok := urls[i]; !ok || url != w.url {
			w.cancel()
			delete(pods, i)
		}
	}
	for i, url := range urls {
		if _, ok := pods[i]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		w := &podWatch{url: url, cancel: cancel, states: map[string]TargetState{}}
		pods[i] = w
		go m.stream(ctx, cluster, i, w)
		go m.poll(ctx, cluster, i, w)
	}
}

// Stop ends every watch of a cluster.
func (m *Monitor) Stop(cluster types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.clusters[cluster] {
		w.cancel()
	}
	delete(m.clusters, cluster)
}

// States returns, per pod index, the last reported state of each target; pods never heard from are absent.
func (m *Monitor) States(cluster types.NamespacedName) map[int]map[string]TargetState {
	m.mu.Lock()
	pods := maps.Clone(m.clusters[cluster])
	m.mu.Unlock()
	out := map[int]map[string]TargetState{}
	for i, w := range pods {
		w.mu.Lock()
		if w.known {
			out[i] = maps.Clone(w.states)
		}
		w.mu.Unlock()
	}
	return out
}

func (m *Monitor) backoff() (time.Duration, time.Duration) {
	lo, hi := m.BackoffMin, m.BackoffMax
	if lo <= 0 {
		lo = 2 * time.Second
	}
	if hi < lo {
		hi = max(10*time.Second, lo)
	}
	return lo, hi
}

func (m *Monitor) changed(cluster types.NamespacedName) {
	if m.Changed != nil {
		m.Changed(cluster)
	}
}

func (m *Monitor) stream(ctx context.Context, cluster types.NamespacedName, pod int, w *podWatch) {
	lo, hi := m.backoff()
	delay := lo
	for ctx.Err() == nil {
		established := false
		_ = m.Client.Watch(ctx, w.url, func() {
			established = true
			delay = lo
			// The stream replays every entry first: start from a clean slate.
			w.mu.Lock()
			w.states, w.known = map[string]TargetState{}, true
			w.mu.Unlock()
		}, func(ev Event) {
			if ev.Store != "state" || ev.Kind != "targets" {
				return
			}
			w.mu.Lock()
			old, had := w.states[ev.Name]
			var st TargetState
			switch ev.EventType {
			case "delete":
				delete(w.states, ev.Name)
			default:
				if err := json.Unmarshal(ev.Object, &st); err != nil {
					w.mu.Unlock()
					return
				}
				w.states[ev.Name] = st
			}
			changed := ev.EventType == "delete" && had || ev.EventType != "delete" && (!had || !sameState(old, st))
			w.mu.Unlock()
			if changed {
				m.changed(cluster)
			}
		})
		if ctx.Err() != nil {
			return
		}
		if established && m.Dropped != nil {
			m.Dropped(cluster, pod)
			m.changed(cluster)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, hi)
	}
}

func (m *Monitor) poll(ctx context.Context, cluster types.NamespacedName, pod int, w *podWatch) {
	interval := m.PollInterval
	if interval <= 0 {
		interval = 15 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reqCtx, cancel := context.WithTimeout(ctx, interval)
		states, err := m.Client.Targets(reqCtx, w.url)
		cancel()
		if err != nil {
			continue
		}
		w.mu.Lock()
		changed := !w.known || len(states) != len(w.states)
		if !changed {
			for k, v := range states {
				if old, ok := w.states[k]; !ok || !sameState(old, v) {
					changed = true
					break
				}
			}
		}
		w.states, w.known = states, true
		stale := w.expected != nil && time.Since(w.expectedAt) >= interval && !sameNames(states, w.expected)
		if stale {
			w.expected = nil // told again by the next apply
		}
		w.mu.Unlock()
		if stale && m.Dropped != nil {
			m.Dropped(cluster, pod)
		}
		if changed || stale {
			m.changed(cluster)
		}
	}
}

func sameState(a, b TargetState) bool {
	return a.State == b.State && a.ConnectionState == b.ConnectionState && a.FailedReason == b.FailedReason &&
		a.LastUpdated.Equal(b.LastUpdated) && maps.Equal(a.Subscriptions, b.Subscriptions)
}

func sameNames(states map[string]TargetState, want map[string]bool) bool {
	if len(states) != len(want) {
		return false
	}
	for name := range states {
		if !want[name] {
			return false
		}
	}
	return true
}
