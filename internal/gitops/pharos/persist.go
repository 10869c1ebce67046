package pharos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Persister keeps the tracked events across a pharos restart.
type Persister interface {
	// Load returns the saved events (none when nothing was saved yet).
	Load(ctx context.Context) ([]Event, error)
	// Save replaces the saved events.
	Save(ctx context.Context, events []Event) error
}

// MemoryPersister keeps events in memory: it survives a restart of the receiver within one process only (tests,
// all-in-one runs without a cluster).
type MemoryPersister struct {
	mu     sync.Mutex
	events []Event
}

// Load implements Persister.
func (m *MemoryPersister) Load(context.Context) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events), nil
}

// Save implements Persister.
func (m *MemoryPersister) Save(_ context.Context, events []Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = slices.Clone(events)
	return nil
}

// ConfigMapKey is the data key of the events in the state ConfigMap.
const ConfigMapKey = "events.json"

// ConfigMapPersister keeps events as JSON in one ConfigMap (created on first save). Pharos runs as one replica, so
// the ConfigMap has one writer; updates still carry the resourceVersion and retry on conflict.
type ConfigMapPersister struct {
	Client client.Client
	Key    types.NamespacedName
}

// Load implements Persister.
func (p *ConfigMapPersister) Load(ctx context.Context) ([]Event, error) {
	cm := &corev1.ConfigMap{}
	if err := p.Client.Get(ctx, p.Key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("loading pharos state %s: %w", p.Key, err)
	}
	var events []Event
	if data := cm.Data[ConfigMapKey]; data != "" {
		if err := json.Unmarshal([]byte(data), &events); err != nil {
			return nil, fmt.Errorf("pharos state %s is corrupt: %w", p.Key, err)
		}
	}
	return events, nil
}

// Save implements Persister; it writes only when the content changed.
func (p *ConfigMapPersister) Save(ctx context.Context, events []Event) error {
	data, err := encodeEvents(events)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := p.Client.Get(ctx, p.Key, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Key.Namespace, Name: p.Key.Name,
				Labels: map[string]string{"app.kubernetes.io/component": "pharos"}},
				Data: map[string]string{ConfigMapKey: data}}
			return p.Client.Create(ctx, cm)
		}
		if err != nil {
			return err
		}
		if cm.Data[ConfigMapKey] == data {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[ConfigMapKey] = data
		return p.Client.Update(ctx, cm)
	})
}

// encodeEvents is deterministic (sorted by ID) so an unchanged state compares equal.
func encodeEvents(events []Event) (string, error) {
	events = slices.Clone(events)
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.ID, b.ID) })
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(events); err != nil {
		return "", err
	}
	return buf.String(), nil
}
