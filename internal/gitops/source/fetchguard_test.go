package source

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// countingListener accepts TCP connections on loopback, counts and closes them: a git:// or ssh server that
// tells whether anything connected.
func countingListener(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return lis, &n
}

// TestRepositoryFetchesGoThroughTheGuard: a target whose repository URL points at the metadata address, at
// loopback (by address or by name) or at a local path is refused before anything connects, over every
// protocol; a redirect to the metadata address is refused; explicitly allowed, the loopback servers are reached.
func TestRepositoryFetchesGoThroughTheGuard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	gitLis, gitConns := countingListener(t)
	sshLis, sshConns := countingListener(t)
	_, httpPort, _ := net.SplitHostPort(srv.Listener.Addr().String())

	strict := &Handler{GitTimeout: 5 * time.Second}
	for name, url := range map[string]string{
		"metadata over http": "http://169.254.169.254/latest/meta-data.git",
		"metadata over git":  "git://169.254.169.254/repo.git",
		"loopback over http": srv.URL + "/repo.git",
		"loopback over git":  "git://" + gitLis.Addr().String() + "/repo.git",
		"loopback over ssh":  "ssh://git@" + sshLis.Addr().String() + "/repo.git",
		"localhost by name":  "http://localhost:" + httpPort + "/repo.git",
		"in-cluster name":    "https://git.default.svc.cluster.local/repo.git",
		"a local path":       "file:///etc",
	} {
		_, err := strict.resolveRef(ctx, Target{RepoURL: url, Ref: "main"}, nil)
		g.Expect(err).To(MatchError(netguard.ErrBlocked), "%s: %v", name, err)
		_, err = strict.fetchCommit(ctx, Target{RepoURL: url, Ref: "main"}, "0123456789012345678901234567890123456789", nil)
		g.Expect(err).To(MatchError(netguard.ErrBlocked), "%s (fetch): %v", name, err)
	}
	g.Expect(hits.Load()).To(BeZero(), "the loopback HTTP server was reached")
	g.Expect(gitConns.Load()).To(BeZero(), "the loopback git server was reached")
	g.Expect(sshConns.Load()).To(BeZero(), "the loopback ssh server was reached")

	// Allowed explicitly (tests and make dev serve repositories on loopback), the same servers are reached: what
	// fails then is the repository, not the guard.
	allowed := &Handler{GitTimeout: 5 * time.Second,
		Guard: netguard.New(netguard.AllowPrefixesForTesting(netip.MustParsePrefix("127.0.0.1/32")))}
	_, err := allowed.resolveRef(ctx, Target{RepoURL: srv.URL + "/repo.git", Ref: "main"}, nil)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err).NotTo(MatchError(netguard.ErrBlocked))
	g.Expect(hits.Load()).NotTo(BeZero())
	_, err = allowed.resolveRef(ctx, Target{RepoURL: "git://" + gitLis.Addr().String() + "/repo.git", Ref: "main"}, nil)
	g.Expect(err).NotTo(MatchError(netguard.ErrBlocked))
	g.Eventually(gitConns.Load).ShouldNot(BeZero())

	// A redirect from an allowed server to the metadata address is refused before it is followed.
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data"+r.URL.Path, http.StatusFound)
	}))
	defer redirector.Close()
	_, err = allowed.resolveRef(ctx, Target{RepoURL: redirector.URL + "/repo.git", Ref: "main"}, nil)
	g.Expect(err).To(MatchError(netguard.ErrBlocked), "%v", err)
}
