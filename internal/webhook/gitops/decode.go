package gitops

import (
	"encoding/json"
	"errors"
)

// decode reads a namespace from an admission request; only metadata matters, so plain JSON is enough.
func decode(raw []byte, into any) error {
	if len(raw) == 0 {
		return errors.New("the admission request carries no object")
	}
	return json.Unmarshal(raw, into)
}
