package asinstalled

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

// PrometheusTap stands in for the Prometheus the manager is configured with: a real Prometheus (promlab) behind a
// reverse proxy that records the queries it forwards and what Prometheus answered.
type PrometheusTap struct {
	server *httptest.Server
	mu     sync.Mutex
	// queries are the PromQL expressions asked, in order, each after the status code Prometheus answered.
	queries []string
}

// StartPrometheusTap starts a Prometheus and the recording proxy in front of it, both stopped when the test ends.
func StartPrometheusTap(t *testing.T) *PrometheusTap {
	t.Helper()
	prom := promlab.StartPrometheus(t)
	upstream, err := url.Parse(prom.URL)
	gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred())
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	tap := &PrometheusTap{}
	tap.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/v1/query") {
			proxy.ServeHTTP(w, r)
			return
		}
		// The query is read from the URL or the form body; the body is put back for Prometheus.
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		query := r.URL.Query().Get("query")
		if q := form.Get("query"); q != "" {
			query = q
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		proxy.ServeHTTP(rec, r)
		tap.mu.Lock()
		tap.queries = append(tap.queries, fmt.Sprintf("%d %s", rec.code, query))
		tap.mu.Unlock()
	}))
	t.Cleanup(tap.server.Close)
	return tap
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Addr is where the tap listens (host:port), for the development dial map.
func (p *PrometheusTap) Addr() string { return strings.TrimPrefix(p.server.URL, "http://") }

// Asked lists the queries so far, each as "<status code> <PromQL>".
func (p *PrometheusTap) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.queries...)
}
