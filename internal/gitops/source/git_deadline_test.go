package source

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// hangingGitServer accepts git:// connections and never answers (a stuck server or a half-open connection).
func hangingGitServer(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // kept open, never read nor written
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "git://" + lis.Addr().String() + "/repo.git"
}

// A fetch and a ref listing against a server that never answers end at the git timeout with an error naming it.
func TestGitFetchAgainstAHangingServerEndsAtTheTimeout(t *testing.T) {
	// The hanging server listens on loopback, which the fetch guard refuses unless allowed.
	h := &Handler{GitTimeout: 300 * time.Millisecond,
		Guard: netguard.New(netguard.AllowPrefixesForTesting(netip.MustParsePrefix("127.0.0.1/32")))}
	tg := Target{Namespace: "team", Name: "web", RepoURL: hangingGitServer(t), Ref: "main"}
	for name, call := range map[string]func() error{
		"fetch": func() error {
			_, err := h.fetchCommit(context.Background(), tg, "0123456789abcdef0123456789abcdef01234567", nil)
			return err
		},
		"list": func() error { _, err := h.resolveRef(context.Background(), tg, nil); return err },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errc := make(chan error, 1)
			go func() { errc <- call() }()
			var err error
			g.Eventually(errc).WithTimeout(10*time.Second).Should(Receive(&err), "the git call hangs: no deadline")
			g.Expect(err).To(MatchError(ContainSubstring("no answer within the git timeout of 300ms (--git-timeout)")))
		})
	}
}
