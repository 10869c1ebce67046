// Package targetsource holds the pure logic of the TargetSource controller: parsing inventory documents, mapping
// them to devices with CEL, turning devices into desired Targets (defaults, labels, sanitising, naming), the prune
// guards, retry backoff, the source digest, and fetching from HTTP inventories. Nothing here talks to the API
// server.
package targetsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// ParseDocument decodes a JSON or YAML document into plain Go values (maps, slices, strings, float64, bool, nil).
func ParseDocument(data []byte) (any, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("empty document")
	}
	var doc any
	if trimmed[0] == '{' || trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &doc); err == nil {
			return doc, nil
		}
	}
	js, err := yaml.YAMLToJSON(trimmed)
	if err != nil {
		return nil, fmt.Errorf("document is neither JSON nor YAML: %w", err)
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("decoding document: %w", err)
	}
	return doc, nil
}
