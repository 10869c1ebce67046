package gnmic_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func TestTargetSourceInventoryOnMetadataOrLoopbackIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// A live inventory on another loopback address: only 127.0.0.1 is exempted in these tests, as an
	// administrator can exempt a private range but never loopback.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`[{"name":"r1","address":"10.0.0.1:57400"}]`))
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	for name, url := range map[string]string{
		"cloud metadata": "http://169.254.169.254/latest/meta-data/",
		"loopback":       srv.URL + "/devices",
		"in-cluster":     "http://gnmic-c-0.gnmic-c." + ns + ".svc.cluster.local:7890/api/v1/config",
	} {
		err := env.Client.Create(ctx, httpSource(ns, "ssrf", url))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", name, err)
		g.Expect(err.Error()).To(ContainSubstring("spec.source.http.url"), name)
		g.Expect(err.Error()).To(ContainSubstring("SSRF guard"), name)
	}
}

func TestTargetSourceRedactsQueryTokensFromStatusAndEvents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	inv := newInventory(t)
	inv.set(func(i *inventory) { i.status = http.StatusServiceUnavailable })
	g.Expect(env.Client.Create(ctx, httpSource(ns, "inv", inv.srv.URL+"/devices?api_key=s3cret-token"))).To(Succeed())

	ts := waitReason(t, ns, "inv", gnmicv1alpha1.ReasonFetchFailed)
	c := meta.FindStatusCondition(ts.Status.Conditions, gnmicv1alpha1.TargetSourceConditionReady)
	g.Expect(c.Message).To(ContainSubstring("api_key=redacted"), "the message still says which URL failed")
	g.Expect(c.Message).NotTo(ContainSubstring("s3cret-token"))
	g.Expect(ts.Status.LastError).NotTo(ContainSubstring("s3cret-token"))
	g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == "inv" {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring("api_key=redacted")))
		g.Expect(notes).NotTo(ContainElement(ContainSubstring("s3cret-token")))
	}).Should(Succeed())
}
