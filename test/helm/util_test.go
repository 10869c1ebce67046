package helm

import (
	"encoding/json"
)

// normalized round-trips v through JSON, so values typed by Go (int, []string) compare with decoded ones.
func normalized(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}
