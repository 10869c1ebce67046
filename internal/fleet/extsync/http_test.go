package extsync

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// testGuard exempts only 127.0.0.1, where httptest listens.
var testGuard = netguard.New(netguard.AllowPrefixesForTesting(netip.MustParsePrefix("127.0.0.1/32")))

func TestHTTPSourceAuthAndRecords(t *testing.T) {
	var gotAuth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization") + " " + r.Method)
		_, _ = w.Write([]byte(`{"data":{"collectors":[{"id":"c1","rack":"r1"}]}}`))
	}))
	defer srv.Close()
	src := NewHTTPSource(testGuard, srv.Client().Transport.(*http.Transport).TLSClientConfig, 100, 10)

	cases := []struct {
		name   string
		creds  Credentials
		method string
		want   string
	}{
		{"bearer wins over basic", Credentials{BearerToken: "tok", Username: "u", Password: "p"}, "", "Bearer tok GET"},
		{"basic", Credentials{Username: "u", Password: "p"}, "POST", "Basic dTpw POST"},
		{"none", Credentials{}, "GET", " GET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			recs, err := src.Fetch(context.Background(), &fleetv1alpha1.HTTPSource{URL: srv.URL + "/inv?token=secret", Method: tc.method, RecordsPath: "data.collectors"}, tc.creds)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(recs).To(HaveLen(1))
			g.Expect(gotAuth.Load()).To(Equal(tc.want))
		})
	}
}

func TestHTTPSourceFailuresAreRedacted(t *testing.T) {
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/500", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(500)
		_, _ = w.Write([]byte("internal detail: password=hunter2"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("["))
		chunk := []byte(strings.Repeat(`{"id":"x"},`, 1000))
		for written := 0; written <= MaxBodyBytes; written += len(chunk) {
			_, _ = w.Write(chunk)
		}
	})
	mux.HandleFunc("/notarray", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"a":1}`)) })
	mux.HandleFunc("/redirect-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam", http.StatusFound)
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte(`[]`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	src := NewHTTPSource(testGuard, nil, 100, 10)
	fetch := func(path string, creds Credentials) error {
		_, err := src.Fetch(context.Background(), &fleetv1alpha1.HTTPSource{URL: srv.URL + path + "?api_key=s3cr3t"}, creds)
		return err
	}
	cases := []struct {
		path, want string
		creds      Credentials
	}{
		{"/500", "HTTP 500", Credentials{}},
		{"/big", "larger than 10485760 bytes", Credentials{}},
		{"/notarray", "the document root is not an array", Credentials{}},
		{"/redirect-metadata", "blocked by the SSRF guard", Credentials{}},
		{"/count", "credentials are only sent over https", Credentials{BearerToken: "t"}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			err := fetch(tc.path, tc.creds)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
			g.Expect(err.Error()).NotTo(ContainSubstring(tc.path))
			g.Expect(err.Error()).NotTo(ContainSubstring("hunter2"))
		})
	}
	NewWithT(t).Expect(calls.Load()).To(BeZero(), "plain http with credentials must not send a request")

	// The default guard refuses the loopback test server altogether.
	_, err := NewHTTPSource(netguard.New(), nil, 100, 10).Fetch(context.Background(), &fleetv1alpha1.HTTPSource{URL: srv.URL + "/count"}, Credentials{})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("127.0.0.1 is loopback")))
}

func TestHTTPSourceRateLimitsPerHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`[]`)) }))
	defer srv.Close()
	// 5 requests per second, burst 1: the 1st request is immediate, the next 4 take at least 0.8 s.
	src := NewHTTPSource(testGuard, nil, 5, 1)
	start := time.Now()
	for range 5 {
		_, err := src.Fetch(context.Background(), &fleetv1alpha1.HTTPSource{URL: srv.URL}, Credentials{})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	NewWithT(t).Expect(time.Since(start)).To(BeNumerically(">=", 750*time.Millisecond))
}
