package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Persister stores the encoded state (ConfigMap `agentrax-registry`, key `state`, in the operator).
type Persister interface {
	// Load returns the persisted state, nil when there is none yet.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the persisted state.
	Save(ctx context.Context, data []byte) error
}

// ErrNotLeader is returned by writes on a replica that is not the leader; it serves reads only.
var ErrNotLeader = errors.New("registry: this replica is not the leader")

// ManagedError refuses a write by another writer to an entry the operator manages (HTTP 409).
type ManagedError struct {
	Key   Key
	Owner string
}

// Error implements error.
func (e *ManagedError) Error() string {
	return fmt.Sprintf("agent %s is managed by %s; change that object instead", e.Key, e.Owner)
}

// ErrFull is returned when a registration would exceed the entry cap or the persisted state's size budget.
var ErrFull = errors.New("registry: full")

// Capacity limits. The whole state is one ConfigMap value, and a ConfigMap holds at most 1 MiB: the budget
// leaves room for the object's metadata, and the entry cap keeps list responses and snapshots bounded.
// DefaultMaxEntriesPerNamespace leaves no namespace more than a quarter of the registry.
const (
	DefaultMaxEntries             = 2000
	DefaultMaxEntriesPerNamespace = DefaultMaxEntries / 4
	MaxStateBytes                 = 900 << 10
)

// Options configure a Registry.
type Options struct {
	// DefaultTTL applies to entries registered without one (--registry-ttl); DefaultTTL when zero.
	DefaultTTL time.Duration
	// Clock is injectable for tests; the real clock when nil.
	Clock clock.WithTicker
	// Persister is optional; without it the registry is memory-only.
	Persister Persister
	// ServerNamePrefix is the reverse-DNS prefix of server.json names; DefaultServerNamePrefix when empty.
	ServerNamePrefix string
	// MaxEntries caps the number of agents; DefaultMaxEntries when zero.
	MaxEntries int
	// MaxEntriesPerNamespace caps the agents of one namespace, so that one namespace cannot fill the registry;
	// DefaultMaxEntriesPerNamespace when zero.
	MaxEntriesPerNamespace int
	Log                    logr.Logger
}

// liveness is what the leader knows between persisted changes: when the agent last answered and how many
// heartbeats in a row failed. It is not persisted (that would write on every heartbeat).
type liveness struct {
	lastSeen time.Time
	strikes  int
}

// Registry is the store of registered agents. Reads are served from an encoded snapshot rebuilt once per
// change; writes are leader-only and persisted when, and only when, the encoded state changes.
type Registry struct {
	opts Options

	leader atomic.Bool
	// followMu orders Apply against BecomeLeader: a watch event that lands while a follower takes over is
	// either superseded by the reload or skipped, never applied over it.
	followMu sync.Mutex

	mu      sync.RWMutex
	entries map[Key]Entry
	live    map[Key]*liveness
	version uint64
	// size approximates the encoded state (the sum of the entries' JSON sizes) for the MaxStateBytes budget.
	size int
	// perNamespace counts the entries of each namespace for MaxEntriesPerNamespace.
	perNamespace map[string]int

	snapMu sync.Mutex
	snap   atomic.Pointer[snapshot]

	saveMu    sync.Mutex
	lastSaved []byte
	dirty     bool
	saves     atomic.Int64
}

// New returns an empty registry. It starts as a follower; SetLeader(true) enables writes.
func New(opts Options) *Registry {
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ServerNamePrefix == "" {
		opts.ServerNamePrefix = DefaultServerNamePrefix
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxEntriesPerNamespace <= 0 {
		opts.MaxEntriesPerNamespace = DefaultMaxEntriesPerNamespace
	}
	return &Registry{opts: opts, entries: map[Key]Entry{}, live: map[Key]*liveness{}, perNamespace: map[string]int{}}
}

// SetLeader switches the replica between leader (writes, heartbeats, sweeps) and follower (reads only).
func (r *Registry) SetLeader(leader bool) { r.leader.Store(leader) }

// BecomeLeader is called when this replica wins the leader election: it reloads the persisted state (the
// previous leader's last write, each entry with one TTL of grace) and then starts writing.
func (r *Registry) BecomeLeader(ctx context.Context) error {
	r.followMu.Lock()
	defer r.followMu.Unlock()
	if err := r.Load(ctx); err != nil {
		return err
	}
	r.SetLeader(true)
	return nil
}

// IsLeader reports whether this replica writes.
func (r *Registry) IsLeader() bool { return r.leader.Load() }

// Saves counts successful Persister.Save calls (the benchmark's write count).
func (r *Registry) Saves() int64 { return r.saves.Load() }

// Load is the cold start: it reads the persisted state and replaces the registry's content with it. Every
// loaded entry gets one TTL of grace from now, so the new leader can heartbeat it before the sweeper judges.
func (r *Registry) Load(ctx context.Context) error {
	if r.opts.Persister == nil {
		return nil
	}
	data, err := r.opts.Persister.Load(ctx)
	if err != nil {
		return err
	}
	entries, decErr := DecodeState(data)
	r.replace(entries, true)
	r.saveMu.Lock()
	r.lastSaved = bytes.Clone(data)
	r.saveMu.Unlock()
	if decErr != nil {
		r.opts.Log.Error(decErr, "dropped invalid entries from the persisted registry state")
	}
	return nil
}

// Apply replaces the content with a state read from the ConfigMap watch: how followers follow the leader.
// The leader ignores it: its memory is the newer truth and the events are echoes of its own writes.
func (r *Registry) Apply(data []byte) error {
	r.followMu.Lock()
	defer r.followMu.Unlock()
	if r.IsLeader() {
		return nil
	}
	entries, err := DecodeState(data)
	r.replace(entries, false)
	r.saveMu.Lock()
	r.lastSaved = bytes.Clone(data)
	r.saveMu.Unlock()
	return err
}

func (r *Registry) replace(entries []Entry, grace bool) {
	now := r.opts.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[Key]Entry, len(entries))
	changed := len(entries) != len(r.entries)
	r.size = 0
	clear(r.perNamespace)
	for _, e := range entries {
		r.size += entrySize(&e)
		r.perNamespace[e.Namespace]++
		old, ok := r.entries[e.Key()]
		if !ok || !old.sameContent(&e) || !old.RegisteredAt.Equal(e.RegisteredAt) || !old.HeartbeatAt.Equal(e.HeartbeatAt) {
			changed = true
		}
		next[e.Key()] = e
		if grace {
			r.live[e.Key()] = &liveness{lastSeen: now}
		}
	}
	for k := range r.live {
		if _, ok := next[k]; !ok {
			delete(r.live, k)
		}
	}
	r.entries = next
	if changed {
		r.version++
	}
}

// Get returns one entry.
func (r *Registry) Get(k Key) (Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[k]
	return e, ok
}

// Liveness returns when the leader last saw k answer (or registered or loaded it) and its current strikes.
func (r *Registry) Liveness(k Key) (lastSeen time.Time, strikes int, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	l := r.live[k]
	if l == nil {
		return time.Time{}, 0, false
	}
	return l.lastSeen, l.strikes, true
}

// Len returns the number of entries.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.entries)
}

// Register adds or updates an entry (already validated). An update that changes nothing only counts as a
// heartbeat. It returns whether the entry was new.
func (r *Registry) Register(ctx context.Context, e Entry) (created bool, err error) {
	return r.register(ctx, e, false)
}

// RegisterUnmanaged is Register for writers other than the operator (POST /agents): an entry the operator
// manages is refused with a *ManagedError, checked under the same lock as the write.
func (r *Registry) RegisterUnmanaged(ctx context.Context, e Entry) (created bool, err error) {
	e.ManagedBy = ""
	return r.register(ctx, e, true)
}

// ErrNotRegistered is returned by Refresh when the entry is gone.
var ErrNotRegistered = errors.New("registry: not registered")

// Refresh is Register for an entry that must already exist: a relist after a tool-change announcement, which
// may arrive after the entry was removed (strikes, deregistration, sweep) and must not bring it back. Checked
// under the same lock as the write; an absent entry answers ErrNotRegistered and changes nothing.
func (r *Registry) Refresh(ctx context.Context, e Entry) error {
	_, err := r.registerMode(ctx, e, false, true)
	return err
}

func (r *Registry) register(ctx context.Context, e Entry, unmanaged bool) (created bool, err error) {
	return r.registerMode(ctx, e, unmanaged, false)
}

func (r *Registry) registerMode(ctx context.Context, e Entry, unmanaged, existingOnly bool) (created bool, err error) {
	if !r.IsLeader() {
		return false, ErrNotLeader
	}
	e.normalize()
	if e.TTL == 0 {
		e.TTL = int64(r.opts.DefaultTTL / time.Second)
	}
	now := r.opts.Clock.Now().UTC().Truncate(time.Second)
	r.mu.Lock()
	old, exists := r.entries[e.Key()]
	if existingOnly && !exists {
		r.mu.Unlock()
		return false, fmt.Errorf("%w: %s", ErrNotRegistered, e.Key())
	}
	if unmanaged && exists && old.ManagedBy != "" {
		r.mu.Unlock()
		return false, &ManagedError{Key: e.Key(), Owner: old.ManagedBy}
	}
	if exists && old.sameContent(&e) {
		r.live[e.Key()] = &liveness{lastSeen: now}
		r.mu.Unlock()
		return false, nil
	}
	e.RegisteredAt, e.HeartbeatAt = now, now
	if exists {
		e.RegisteredAt = old.RegisteredAt
	}
	size := r.size + entrySize(&e)
	if exists {
		size -= entrySize(&old)
	}
	if err := r.fits(e.Namespace, exists, size); err != nil {
		r.mu.Unlock()
		return false, err
	}
	r.live[e.Key()] = &liveness{lastSeen: now}
	if !exists {
		r.perNamespace[e.Namespace]++
	}
	r.entries[e.Key()] = e
	r.size = size
	r.version++
	r.mu.Unlock()
	return !exists, r.persist(ctx)
}

// Deregister removes an entry; it reports whether there was one.
func (r *Registry) Deregister(ctx context.Context, k Key) (bool, error) {
	return r.deregister(ctx, k, false)
}

// DeregisterUnmanaged is Deregister for writers other than the operator (DELETE /agents/...): an entry the
// operator manages is refused with a *ManagedError.
func (r *Registry) DeregisterUnmanaged(ctx context.Context, k Key) (bool, error) {
	return r.deregister(ctx, k, true)
}

func (r *Registry) deregister(ctx context.Context, k Key, unmanaged bool) (bool, error) {
	if !r.IsLeader() {
		return false, ErrNotLeader
	}
	r.mu.Lock()
	old, ok := r.entries[k]
	if unmanaged && ok && old.ManagedBy != "" {
		r.mu.Unlock()
		return false, &ManagedError{Key: k, Owner: old.ManagedBy}
	}
	r.remove(k)
	if ok {
		r.version++
	}
	r.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, r.persist(ctx)
}

// fits checks the caps for a registration in namespace ns that brings the state to size bytes; an update of
// an existing entry is never refused for a count.
func (r *Registry) fits(ns string, exists bool, size int) error {
	if !exists && len(r.entries) >= r.opts.MaxEntries {
		return fmt.Errorf("%w: %d agents registered, the maximum", ErrFull, len(r.entries))
	}
	if n := r.perNamespace[ns]; !exists && n >= r.opts.MaxEntriesPerNamespace {
		return fmt.Errorf("%w: %d agents of namespace %q registered, the maximum per namespace", ErrFull, n, ns)
	}
	if size+len(`{"version":1,"agents":[]}`) > MaxStateBytes {
		return fmt.Errorf("%w: the state would take %d bytes, over the %d-byte budget of its ConfigMap", ErrFull,
			size, MaxStateBytes)
	}
	return nil
}

// remove deletes k; r.mu is held.
func (r *Registry) remove(k Key) {
	if e, ok := r.entries[k]; ok {
		r.size -= entrySize(&e)
		delete(r.entries, k)
		if r.perNamespace[k.Namespace]--; r.perNamespace[k.Namespace] <= 0 {
			delete(r.perNamespace, k.Namespace)
		}
	}
	delete(r.live, k)
}

// entrySize is the entry's share of the encoded state.
func entrySize(e *Entry) int {
	b, _ := json.Marshal(e)
	return len(b) + 1
}

// HeartbeatResult is what a heartbeat did.
type HeartbeatResult int

const (
	// Healthy means the agent answered and is registered.
	Healthy HeartbeatResult = iota
	// Missing means the agent answered but is not registered (cold restart, swept): the caller re-registers it.
	Missing
	// Strike means the agent did not answer; fewer than MaxStrikes in a row so far.
	Strike
	// Deregistered means MaxStrikes failures in a row; the entry was removed.
	Deregistered
)

// String names the result.
func (h HeartbeatResult) String() string {
	return [...]string{"Healthy", "Missing", "Strike", "Deregistered"}[h]
}

// Heartbeat records the outcome of a probe of k. A success clears the strikes; the MaxStrikes-th failure in
// a row deregisters. Successes write nothing to the persisted state.
func (r *Registry) Heartbeat(ctx context.Context, k Key, ok bool) (HeartbeatResult, int, error) {
	if !r.IsLeader() {
		return Strike, 0, ErrNotLeader
	}
	now := r.opts.Clock.Now()
	r.mu.Lock()
	_, exists := r.entries[k]
	if !exists {
		delete(r.live, k)
		r.mu.Unlock()
		if ok {
			return Missing, 0, nil
		}
		return Deregistered, 0, nil
	}
	l := r.live[k]
	if l == nil {
		l = &liveness{lastSeen: now}
		r.live[k] = l
	}
	if ok {
		l.lastSeen, l.strikes = now, 0
		r.mu.Unlock()
		return Healthy, 0, nil
	}
	l.strikes++
	strikes := l.strikes
	if strikes < MaxStrikes {
		r.mu.Unlock()
		return Strike, strikes, nil
	}
	r.remove(k)
	r.version++
	r.mu.Unlock()
	return Deregistered, strikes, r.persist(ctx)
}

// Sweep removes entries not seen within their TTL (an agent whose deletion bypassed the finalizer, an
// external registration not refreshed). It also retries a failed save. Leader only; a no-op elsewhere.
func (r *Registry) Sweep(ctx context.Context) ([]Key, error) {
	if !r.IsLeader() {
		return nil, nil
	}
	now := r.opts.Clock.Now()
	var removed []Key
	r.mu.Lock()
	for k, e := range r.entries {
		seen := e.HeartbeatAt
		if l := r.live[k]; l != nil && l.lastSeen.After(seen) {
			seen = l.lastSeen
		}
		if now.Sub(seen) > e.ttl() {
			removed = append(removed, k)
			r.remove(k)
		}
	}
	if len(removed) > 0 {
		r.version++
	}
	r.mu.Unlock()
	r.saveMu.Lock()
	dirty := r.dirty
	r.saveMu.Unlock()
	if len(removed) > 0 || dirty {
		return removed, r.persist(ctx)
	}
	return removed, nil
}

// RunSweeper sweeps every interval (SweepInterval when zero) until ctx ends.
func (r *Registry) RunSweeper(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = SweepInterval
	}
	t := r.opts.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			removed, err := r.Sweep(ctx)
			if err != nil {
				r.opts.Log.Error(err, "persisting the registry after a sweep")
			}
			for _, k := range removed {
				r.opts.Log.Info("swept expired agent", "agent", k.String())
			}
		}
	}
}

// persist saves the current state if its encoding differs from what was last saved. A failed save marks
// the registry dirty; the next sweep retries.
func (r *Registry) persist(ctx context.Context) error {
	if r.opts.Persister == nil {
		return nil
	}
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	data, err := EncodeState(r.List())
	if err != nil {
		return err
	}
	if bytes.Equal(data, r.lastSaved) {
		r.dirty = false
		return nil
	}
	if err := r.opts.Persister.Save(ctx, data); err != nil {
		r.dirty = true
		return err
	}
	r.saves.Add(1)
	r.lastSaved, r.dirty = data, false
	return nil
}

// List returns the entries sorted by namespace and name.
func (r *Registry) List() []Entry {
	return r.snapshot().agents
}

// HealthInterval returns the heartbeat interval to use for a TTL: the configured one when three failed
// heartbeats plus a probe timeout fit inside the TTL, else TTL/4. This keeps the strike rule meaningful: an
// agent that stops answering is deregistered by strikes (with the MCPHandshakeFailed condition) before the
// sweeper silently expires it.
func HealthInterval(ttl, configured, probeTimeout time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if configured > 0 && time.Duration(MaxStrikes)*configured+probeTimeout < ttl {
		return configured
	}
	return ttl / 4
}
