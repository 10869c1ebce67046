package mcp_test

import (
	"fmt"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
)

// The question issue #39 asked before the hand-written client could go: does the official go-sdk client (v1.8.0,
// the newest the module proxy serves) negotiate every revision the registry accepts? Against servers pinned to
// each of them it connects, lists the tools and reports the revision; it also leaves no session behind once
// closed. It does, so package mcp is now built on it; this test keeps the SDK itself honest on upgrades.
func TestOfficialSDKClientNegotiatesEveryRevision(t *testing.T) {
	for _, tc := range []struct {
		versions  []string
		stateless bool
		want      string
	}{
		{[]string{"2025-03-26"}, false, "2025-03-26"},
		{[]string{"2025-06-18"}, false, "2025-06-18"},
		{[]string{"2025-11-25"}, false, "2025-11-25"},
		{nil, true, "2026-07-28"},
	} {
		t.Run(fmt.Sprintf("%v stateless=%v", tc.versions, tc.stateless), func(t *testing.T) {
			g := NewWithT(t)
			srv := newAgentServer(t, serverOpts{tools: 5, pageSize: 2, versions: tc.versions, stateless: tc.stateless})
			c := sdk.NewClient(&sdk.Implementation{Name: "probe", Version: "1"}, nil)
			cs, err := c.Connect(ctx(t), &sdk.StreamableClientTransport{Endpoint: srv.endpoint()}, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cs.InitializeResult().ProtocolVersion).To(Equal(tc.want))
			var names []string
			for tool, err := range cs.Tools(ctx(t), nil) {
				g.Expect(err).NotTo(HaveOccurred())
				names = append(names, tool.Name)
			}
			g.Expect(names).To(Equal(expectedNames(5)))
			g.Expect(cs.Close()).To(Succeed())
			g.Eventually(srv.liveSessions).Should(BeZero(), "no session left behind")
		})
	}
}
