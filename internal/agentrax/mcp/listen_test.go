package mcp_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
)

// A stream is bounded: it ends by itself after maxAge (nil: the caller reopens it), and on a legacy server the
// session it opened is DELETEd, so a listener leaves no session behind between streams.
func TestListenToolChangesIsBoundedAndLeavesNoSession(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
	}{{"legacy session, GET stream", false}, {"sessionless, subscriptions/listen", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := newAgentServer(t, serverOpts{tools: 1, stateless: tc.stateless})
			c := &mcp.Client{}
			var changes atomic.Int32
			done := make(chan error, 1)
			started := time.Now()
			go func() {
				done <- c.ListenToolChanges(context.Background(), srv.endpoint(), 3*time.Second, func() { changes.Add(1) })
			}()
			// Tools added while the stream is open are announced (the first may race the stream's opening).
			g.Eventually(func() int32 {
				srv.sdk.AddTool(&sdk.Tool{Name: fmt.Sprintf("added-%d", time.Now().UnixNano()), InputSchema: map[string]any{"type": "object"}},
					func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
						return &sdk.CallToolResult{}, nil
					})
				return changes.Load()
			}, 2*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", 1))
			g.Eventually(done, 5*time.Second).Should(Receive(BeNil()))
			g.Expect(time.Since(started)).To(BeNumerically(">=", 3*time.Second), "ended by its age limit")
			created, deleted, _, _ := srv.counts()
			g.Expect(deleted).To(Equal(created), "every session opened was DELETEd")
			g.Eventually(srv.liveSessions).Should(BeZero())
		})
	}
}

// A server without tools.listChanged gets no stream.
func TestListenToolChangesNotOffered(t *testing.T) {
	g := NewWithT(t)
	srv := newAgentServer(t, serverOpts{tools: 1})
	srv.sdk.RemoveTools("tool-00") // no tools: the SDK announces no tools capability
	err := (&mcp.Client{}).ListenToolChanges(ctx(t), srv.endpoint(), time.Minute, func() {})
	g.Expect(err).To(MatchError(mcp.ErrListChangedNotOffered))
	g.Eventually(srv.liveSessions).Should(BeZero())
}
