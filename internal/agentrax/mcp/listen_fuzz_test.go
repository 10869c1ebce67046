package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReadNotifications(t *testing.T) {
	cases := []struct {
		name        string
		stream      string
		wantChanged int
		wantErr     string
	}{
		{"two changes among other events", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" +
			": keepalive\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"roots/list\"}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{}}\n\n", 2, ""},
		{"acknowledged", "data: {\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"toolsListChanged\":true}}}\n\n" +
			"data: {\"method\":\"notifications/tools/list_changed\"}\n\n", 1, ""},
		{"not acknowledged", "data: {\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{}}}\n\n" +
			"data: {\"method\":\"notifications/tools/list_changed\"}\n\n", 0, "does not offer"},
		{"garbage", "data: {nope\n\n", 0, "decoding stream event"},
		{"event over the size cap", "data: {\"method\":\"" + strings.Repeat("x", 200) + "\"}\n\n", 0, "size limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &Client{MaxResponseBytes: 128}
			changed := 0
			err := c.readNotifications(strings.NewReader(tc.stream), func() { changed++ }, acknowledgedToolsListChanged)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(changed).To(Equal(tc.wantChanged))
		})
	}
}

// FuzzReadNotifications: any stream ends in nil or an error, never a panic, and a change is counted only for an
// event that decodes as that notification.
func FuzzReadNotifications(f *testing.F) {
	f.Add("data: {\"method\":\"notifications/tools/list_changed\"}\n\n")
	f.Add("data: {\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"toolsListChanged\":true}}}\n\n")
	f.Add("data: {\"id\":1,\"result\":{}}\ndata\n\n:\n\ndata: [\n")
	f.Fuzz(func(t *testing.T, stream string) {
		c := &Client{MaxResponseBytes: 4096}
		changed := 0
		_ = c.readNotifications(strings.NewReader(stream), func() { changed++ }, acknowledgedToolsListChanged)
		if changed > strings.Count(stream, "data") {
			t.Fatalf("%d changes from %d data lines", changed, strings.Count(stream, "data"))
		}
		_, _, _ = notification([]byte(stream))
		_ = acknowledgedToolsListChanged(json.RawMessage(stream))
	})
}
