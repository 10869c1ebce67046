package mcp

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReadSSE(t *testing.T) {
	cases := []struct {
		name    string
		stream  string
		wantErr string
		want    string
	}{
		{"single event", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n", "", "{}"},
		{"server request and notification skipped",
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n\n" +
				"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
				"id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"a\":1}}\n\n", "", `{"a":1}`},
		{"multi-line data joined", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":7,\"result\":[]}\n\n", "", "[]"},
		{"comment and priming event", ": ping\n\nid: 0\ndata:\n\nevent: message\ndata: {\"id\":7,\"result\":1}\n", "", "1"},
		{"other id then end", "data: {\"id\":8,\"result\":1}\n\n", "ended without a response", ""},
		{"garbage", "data: {nope\n\n", "decoding SSE event", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			msg, err := readSSE(strings.NewReader(tc.stream), 7)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(msg.Result)).To(Equal(tc.want))
		})
	}
}

// FuzzReadSSE: any stream either yields the response with our id or an error; never a panic or a reply to
// another request.
func FuzzReadSSE(f *testing.F) {
	f.Add("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n")
	f.Add("data: {\"id\":7,\ndata: \"result\":{}}\n")
	f.Add(": c\n\nevent: x\ndata\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		msg, err := readSSE(strings.NewReader(stream), 7)
		if err == nil && (msg == nil || !sameID(msg.ID, 7) || msg.Method != "") {
			t.Fatalf("accepted a message that is not our response: %+v", msg)
		}
	})
}
