package pharos

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// ConfigMapKey is the data key of the events in the state ConfigMap (JSON, readable with kubectl) while they fit
// in inlineLimit; CompressedKey is the binaryData key of the same JSON gzip-compressed beyond it.
const (
	ConfigMapKey  = "events.json"
	CompressedKey = "events.json.gz"
)

const (
	// inlineLimit is the largest JSON kept readable in data.
	inlineLimit = 256 << 10
	// maxStateBytes is what one ConfigMap may hold with room to spare (the API server refuses more than 1 MiB).
	maxStateBytes = 960 << 10
	// maxStateJSON bounds what Load decompresses.
	maxStateJSON = 256 << 20
)

// ConfigMapPersister keeps events as JSON in one ConfigMap (created on first save), gzip-compressed once they
// outgrow inlineLimit: an event's reason and IDs compress about tenfold, so thousands of targets' failures fit in
// the 1 MiB a ConfigMap holds. Pharos runs as one replica, so the ConfigMap has one writer; updates still carry the
// resourceVersion and retry on conflict.
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
	data := []byte(cm.Data[ConfigMapKey])
	if gz := cm.BinaryData[CompressedKey]; len(gz) > 0 {
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("pharos state %s is corrupt: %w", p.Key, err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, maxStateJSON)); err != nil {
			return nil, fmt.Errorf("pharos state %s is corrupt: %w", p.Key, err)
		}
	}
	var events []Event
	if len(data) > 0 {
		if err := json.Unmarshal(data, &events); err != nil {
			return nil, fmt.Errorf("pharos state %s is corrupt: %w", p.Key, err)
		}
	}
	return events, nil
}

// stateContent is what Save writes: JSON in data, or compressed in binaryData.
func stateContent(events []Event) (data string, gz []byte, err error) {
	if data, err = encodeEvents(events); err != nil || len(data) <= inlineLimit {
		return data, nil, err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := io.WriteString(zw, data); err != nil {
		return "", nil, err
	}
	if err := zw.Close(); err != nil {
		return "", nil, err
	}
	if buf.Len() > maxStateBytes {
		return "", nil, fmt.Errorf("pharos state of %d events is %d bytes compressed, over the %d a ConfigMap holds",
			len(events), buf.Len(), maxStateBytes)
	}
	return "", buf.Bytes(), nil
}

// Save implements Persister; it writes only when the content changed.
func (p *ConfigMapPersister) Save(ctx context.Context, events []Event) error {
	data, gz, err := stateContent(events)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := p.Client.Get(ctx, p.Key, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Key.Namespace, Name: p.Key.Name,
				Labels: map[string]string{"app.kubernetes.io/component": "pharos"}}}
			setState(cm, data, gz)
			return p.Client.Create(ctx, cm)
		}
		if err != nil {
			return err
		}
		if cm.Data[ConfigMapKey] == data && bytes.Equal(cm.BinaryData[CompressedKey], gz) {
			return nil
		}
		setState(cm, data, gz)
		return p.Client.Update(ctx, cm)
	})
}

// setState puts the state in cm under exactly one of the two keys.
func setState(cm *corev1.ConfigMap, data string, gz []byte) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if cm.BinaryData == nil {
		cm.BinaryData = map[string][]byte{}
	}
	if gz != nil {
		delete(cm.Data, ConfigMapKey)
		cm.BinaryData[CompressedKey] = gz
		return
	}
	delete(cm.BinaryData, CompressedKey)
	cm.Data[ConfigMapKey] = data
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
