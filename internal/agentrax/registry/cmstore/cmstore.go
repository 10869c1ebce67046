// Package cmstore keeps the MCP registry's state in ConfigMap `agentrax-registry` (key `state`): the leader's
// Persister, and the watch that followers apply so that every replica serves the same reads.
package cmstore

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// Name and Key of the ConfigMap.
const (
	Name = "agentrax-registry"
	Key  = "state"
)

// Store is the registry.Persister on a ConfigMap. Client should be uncached (the manager's API reader plus
// writer): Load at cold start must see the latest state, not a cache that has not synced.
type Store struct {
	Client    client.Client
	Namespace string
	// Name defaults to agentrax-registry.
	Name string
}

func (s *Store) key() types.NamespacedName {
	name := s.Name
	if name == "" {
		name = Name
	}
	return types.NamespacedName{Namespace: s.Namespace, Name: name}
}

// Load returns the persisted state, nil when the ConfigMap does not exist yet.
func (s *Store) Load(ctx context.Context) ([]byte, error) {
	var cm corev1.ConfigMap
	if err := s.Client.Get(ctx, s.key(), &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the registry ConfigMap: %w", err)
	}
	return []byte(cm.Data[Key]), nil
}

// Save writes the state. The update carries the resourceVersion just read, so a concurrent writer causes a
// conflict (retried on fresh data) instead of a silent overwrite of something else in the ConfigMap.
func (s *Store) Save(ctx context.Context, data []byte) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := s.Client.Get(ctx, s.key(), &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.key().Namespace, Name: s.key().Name,
					Labels: map[string]string{"app.kubernetes.io/component": "agentrax-registry"}},
				Data: map[string]string{Key: string(data)},
			}
			return s.Client.Create(ctx, &cm)
		}
		if err != nil {
			return err
		}
		if cm.Data[Key] == string(data) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[Key] = string(data)
		return s.Client.Update(ctx, &cm)
	})
}

// Follow applies every version of the ConfigMap to r while r is a follower, until ctx ends: a list-then-watch
// of the one object, restarted when the watch closes. The leader's own state is authoritative, so events are
// ignored while r is the leader (they are echoes of its writes).
func Follow(ctx context.Context, c client.WithWatch, namespace, name string, r *registry.Registry) error {
	if name == "" {
		name = Name
	}
	for ctx.Err() == nil {
		if err := followOnce(ctx, c, namespace, name, r); err != nil && ctx.Err() == nil {
			// A watch that cannot start (API server restarting) is retried after a short pause.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

func followOnce(ctx context.Context, c client.WithWatch, namespace, name string, r *registry.Registry) error {
	var list corev1.ConfigMapList
	sel := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}
	if err := c.List(ctx, &list, client.InNamespace(namespace), sel); err != nil {
		return err
	}
	apply := func(data []byte) {
		_ = r.Apply(data) // a no-op on the leader; invalid entries are dropped, the rest is served
	}
	if len(list.Items) == 0 {
		apply(nil)
	} else {
		apply([]byte(list.Items[0].Data[Key]))
	}
	w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(namespace), sel,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					apply([]byte(cm.Data[Key]))
				}
			case watch.Deleted:
				apply(nil)
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			}
		}
	}
}
