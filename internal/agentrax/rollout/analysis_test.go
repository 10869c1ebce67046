package rollout

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// These tests pin the classification of API answers Prometheus cannot easily be made to give (5xx, garbage,
// hangs). The behaviour against a real Prometheus is tested in test/promreal.
func TestQueryClassification(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		body        string
		want        Sample
		unreachable bool
		queryErr    string
	}{
		{name: "vector", status: 200,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.1,"42.5"]}]}}`,
			want: Sample{Value: 42.5}},
		{name: "scalar", status: 200,
			body: `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"0.25"]}}`,
			want: Sample{Value: 0.25}},
		{name: "+Inf is a value", status: 200,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]}]}}`,
			want: Sample{Value: math.Inf(1)}},
		{name: "empty vector is no data", status: 200,
			body: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: Sample{NoData: true}},
		{name: "NaN is no data", status: 200,
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}`,
			want: Sample{NoData: true}},
		{name: "bad_data is a query error", status: 400,
			body:     `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"}`,
			queryErr: "bad_data: 1:5: parse error"},
		{name: "execution error is a query error", status: 422,
			body:     `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`,
			queryErr: "execution: many-to-many"},
		{name: "two series is a query error", status: 200,
			body:     `{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]},{"value":[1,"2"]}]}}`,
			queryErr: "2 series where one was expected"},
		{name: "matrix is a query error", status: 200,
			body:     `{"status":"success","data":{"resultType":"matrix","result":[]}}`,
			queryErr: "unexpected result type matrix"},
		{name: "404 page is a query error", status: 404, body: "404 page not found",
			queryErr: "HTTP 404 with a body that is not a Prometheus API response"},
		{name: "503 timeout is unreachable", status: 503,
			body: `{"status":"error","errorType":"timeout","error":"query timed out"}`, unreachable: true},
		{name: "502 from a proxy is unreachable", status: 502, body: "<html>bad gateway</html>", unreachable: true},
		{name: "500 is unreachable", status: 500, body: "", unreachable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				g.Expect(r.URL.Path).To(Equal("/prefix/api/v1/query"))
				g.Expect(r.ParseForm()).To(Succeed())
				g.Expect(r.PostForm.Get("query")).To(Equal("up"))
				g.Expect(r.PostForm.Get("time")).To(Equal("1700000000.500"))
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := &Prometheus{URL: srv.URL + "/prefix/"}
			s, err := p.Query(context.Background(), "up", time.UnixMilli(1700000000500))
			var unreachable *UnreachableError
			var qe *QueryError
			switch {
			case tc.unreachable:
				g.Expect(errors.As(err, &unreachable)).To(BeTrue(), "got %v", err)
			case tc.queryErr != "":
				g.Expect(errors.As(err, &qe)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(tc.queryErr))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(s.NoData).To(Equal(tc.want.NoData))
				if !tc.want.NoData {
					g.Expect(s.Value).To(Equal(tc.want.Value))
				}
			}
		})
	}
}

func TestQueryUnreachable(t *testing.T) {
	g := NewWithT(t)
	// A port nobody listens on: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	var unreachable *UnreachableError
	_, err = (&Prometheus{URL: "http://" + addr}).Query(context.Background(), "up", time.Time{})
	g.Expect(errors.As(err, &unreachable)).To(BeTrue(), "got %v", err)

	// A server that hangs past the timeout.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	_, err = (&Prometheus{URL: srv.URL, Timeout: 100 * time.Millisecond}).Query(context.Background(), "up", time.Time{})
	g.Expect(errors.As(err, &unreachable)).To(BeTrue(), "got %v", err)
}

func TestAnalyzeClassifies(t *testing.T) {
	g := NewWithT(t)
	answers := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		body, ok := answers[r.PostForm.Get("query")]
		if !ok {
			w.WriteHeader(503)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	p := &Prometheus{URL: srv.URL}
	target := Target{Namespace: "ns", Name: "bot", Variant: "canary"}
	q := Metrics{}.Build(target, time.Minute)
	vec := func(v string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"` + v + `"]}]}}`
	}
	answers[q.Requests] = vec("120")
	answers[q.ErrorRate] = vec("0.01")
	answers[q.P99] = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	a := p.Analyze(context.Background(), Metrics{}, target, time.Minute, time.Time{})
	g.Expect(a.Outcome).To(Equal(Measured))
	g.Expect(a.Requests).To(Equal(120.0))
	g.Expect(a.ErrorRate).To(Equal(0.01))
	g.Expect(math.IsNaN(a.P99)).To(BeTrue())

	answers[q.P99] = `{"status":"error","errorType":"bad_data","error":"parse error"}`
	g.Expect(p.Analyze(context.Background(), Metrics{}, target, time.Minute, time.Time{}).Outcome).To(Equal(QueryFailed))
	delete(answers, q.P99)
	a = p.Analyze(context.Background(), Metrics{}, target, time.Minute, time.Time{})
	g.Expect(a.Outcome).To(Equal(Unreachable))
	g.Expect(a.Err).To(ContainSubstring("503"))
}
