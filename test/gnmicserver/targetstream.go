package gnmicserver

// The target state stream: GET /api/v1/targets and the server-sent events gNMIc publishes on every state change.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

func (s *Server) publishLocked(store, name, event string, obj any) {
	ev := SSEEvent{Timestamp: time.Now().UTC(), Store: store, Kind: "targets", Name: name, EventType: event, Object: obj}
	for sub := range s.subscribers {
		if sub.store != "all" && sub.store != store {
			continue
		}
		select {
		case sub.ch <- ev:
		default: // a subscriber too slow to keep up loses its stream, as it would on a real collector
			close(sub.done)
			delete(s.subscribers, sub)
		}
	}
}

func (s *Server) handleTargets(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var out []TargetResponse
	for _, name := range slices.Sorted(maps.Keys(s.config.Targets)) {
		if id := r.PathValue("id"); id != "" && id != name {
			continue
		}
		tr := TargetResponse{Name: name, Config: s.config.Targets[name]}
		if st, ok := s.states[name]; ok {
			tr.State = cloneState(st)
		}
		out = append(out, tr)
	}
	s.mu.Unlock()
	if id := r.PathValue("id"); id != "" && len(out) == 0 {
		writeErrors(w, http.StatusNotFound, "target not found")
		return
	}
	if out == nil {
		out = []TargetResponse{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSSE(w http.ResponseWriter, r *http.Request) {
	kind := r.PathValue("kind")
	if kind != "targets" {
		writeErrors(w, http.StatusBadRequest, fmt.Sprintf("kind %q is not served by this test server", kind))
		return
	}
	store := r.URL.Query().Get("store")
	if store == "" {
		store = "all"
	}
	if store != "config" && store != "state" && store != "all" {
		writeErrors(w, http.StatusBadRequest, fmt.Sprintf("invalid store %q; expected one of: config, state, all", store))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming not supported", http.StatusInternalServerError)
		return
	}
	sub := &subscriber{store: store, ch: make(chan SSEEvent, 4096), done: make(chan struct{})}
	s.mu.Lock()
	// Initial replay: every existing entry as a create event.
	for _, name := range slices.Sorted(maps.Keys(s.config.Targets)) {
		if store != "state" {
			sub.ch <- SSEEvent{Timestamp: time.Now().UTC(), Store: "config", Kind: kind, Name: name, EventType: "create", Object: s.config.Targets[name]}
		}
		if st, ok := s.states[name]; ok && store != "config" {
			sub.ch <- SSEEvent{Timestamp: time.Now().UTC(), Store: "state", Kind: kind, Name: name, EventType: "create", Object: cloneState(st)}
		}
	}
	s.subscribers[sub] = true
	s.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			s.mu.Lock()
			delete(s.subscribers, sub)
			s.mu.Unlock()
			return
		case <-sub.done:
			return
		case <-keepalive.C:
			_, _ = fmt.Fprint(w, ": keepalive\n\n")
			flusher.Flush()
		case ev := <-sub.ch:
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.EventType, data)
			flusher.Flush()
		}
	}
}
