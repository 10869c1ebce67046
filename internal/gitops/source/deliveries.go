package source

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// Replay protection for the webhook. GitHub sends every delivery with a unique X-GitHub-Delivery ID, but the ID
// is not covered by the signature: a captured delivery can be sent again under a new ID. So a delivery is known
// by its ID and by the digest of its signed body, and either seen before makes it a replay. The memory is per
// process and bounded; after a restart the head check (only the ref's current head is deployed) keeps a replayed
// old push from rolling a tenant back.
const (
	deliveryMemory = 24 * time.Hour // GitHub's own redelivery window is shorter
	maxDeliveries  = 50000
)

type deliveryLog struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	order []string // insertion order, for eviction
}

func deliveryKeys(namespace, id string, body []byte) []string {
	sum := sha256.Sum256(body)
	keys := []string{"body/" + namespace + "/" + hex.EncodeToString(sum[:])}
	if id != "" {
		keys = append(keys, "id/"+namespace+"/"+id)
	}
	return keys
}

// claim records keys and reports true, or reports false when one of them was seen within deliveryMemory.
func (d *deliveryLog) claim(keys []string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]time.Time{}
	}
	for _, k := range keys {
		if at, ok := d.seen[k]; ok && now.Sub(at) < deliveryMemory {
			return false
		}
	}
	for _, k := range keys {
		d.seen[k] = now
		d.order = append(d.order, k)
	}
	for len(d.order) > maxDeliveries {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	return true
}

// release forgets keys: a delivery that failed on our side (5xx) may be redelivered.
func (d *deliveryLog) release(keys []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		delete(d.seen, k)
	}
}
