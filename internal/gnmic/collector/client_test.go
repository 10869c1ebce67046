package collector

import (
	"bytes"
	"io"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReadEventsTable(t *testing.T) {
	for name, tc := range map[string]struct {
		stream    string
		wantNames []string
	}{
		"empty":          {"", nil},
		"comment only":   {": keepalive\n\n", nil},
		"one event":      {"event: create\ndata: {\"name\":\"a\",\"store\":\"state\"}\n\n", []string{"a"}},
		"no space":       {"data:{\"name\":\"b\"}\n\n", []string{"b"}},
		"no final blank": {"data: {\"name\":\"c\"}\n", nil},
		"bad json":       {"data: nope\n\ndata: {\"name\":\"d\"}\n\n", []string{"d"}},
		"multi-line":     {"data: {\"name\":\ndata: \"e\"}\n\n", []string{"e"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var names []string
			err := ReadEvents(strings.NewReader(tc.stream), func(e Event) { names = append(names, e.Name) })
			g.Expect(err).To(MatchError(io.ErrUnexpectedEOF))
			g.Expect(names).To(Equal(tc.wantNames))
		})
	}
}

// FuzzReadEvents: the SSE parser never panics and always ends with an error.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte("event: create\ndata: {\"store\":\"state\",\"kind\":\"targets\",\"name\":\"a\",\"object\":{}}\n\n"))
	f.Add([]byte(": keepalive\n\ndata: x\n\n"))
	f.Add([]byte("data: {\"name\":1}\n\n\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := ReadEvents(bytes.NewReader(data), func(Event) {}); err == nil {
			t.Fatal("ReadEvents returned nil at the end of the stream")
		}
	})
}
