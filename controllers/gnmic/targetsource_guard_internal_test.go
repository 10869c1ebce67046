package gnmic

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// A TargetSource admitted before the guard existed (or whose name resolves to loopback later) is still refused
// when the fetch dials: the guard checks the very address the socket is about to reach.
func TestInventoryFetchDialsThroughTheSSRFGuard(t *testing.T) {
	g := NewWithT(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`[{"name":"r1","address":"10.0.0.1:57400"}]`))
	}))
	t.Cleanup(srv.Close)
	mapper, err := targetsource.NewMapper()
	g.Expect(err).NotTo(HaveOccurred())
	src := &gnmicv1alpha1.HTTPSource{URL: srv.URL + "/devices"}

	r := &TargetSourceReconciler{Mapper: mapper}
	_, err = r.fetchHTTP(context.Background(), "ns", src)
	g.Expect(err).To(MatchError(netguard.ErrBlocked))
	g.Expect(hits.Load()).To(BeZero(), "no request reached the loopback inventory")

	r.Guard = netguard.New(netguard.AllowPrefixesForTesting(netip.MustParsePrefix("127.0.0.1/32")))
	f, err := r.fetchHTTP(context.Background(), "ns", src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.devices).To(HaveLen(1))
}
