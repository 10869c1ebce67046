package rollout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Prometheus is a minimal client of the Prometheus HTTP API's instant query endpoint (/api/v1/query).
type Prometheus struct {
	// URL is Prometheus's base URL, e.g. http://prometheus.monitoring.svc:9090 (a path prefix is kept).
	URL string
	// HTTP is the client to use; nil means a client with Timeout.
	HTTP *http.Client
	// Timeout bounds each query; zero means 10 s. A query that times out counts as unreachable.
	Timeout time.Duration
	// BearerTokenFile, when set, is read before every query and sent as `Authorization: Bearer`, as OpenShift's
	// Thanos querier and other authenticating proxies require. Re-reading follows a rotated (projected) token.
	BearerTokenFile string
}

// NewPrometheus is a client for url whose queries carry the token of tokenFile (when set) and whose https
// connections trust the PEM CAs of caFile (when set) instead of the system's; base carries the dialing.
func NewPrometheus(url, tokenFile, caFile string, base *http.Transport) (*Prometheus, error) {
	transport := base.Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--prometheus-ca-file %s holds no PEM certificate", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if tokenFile != "" {
		if _, err := os.Stat(tokenFile); err != nil {
			return nil, fmt.Errorf("--prometheus-bearer-token-file: %w", err)
		}
	}
	return &Prometheus{URL: url, HTTP: &http.Client{Transport: transport}, BearerTokenFile: tokenFile}, nil
}

// UnreachableError means Prometheus did not answer: network error, timeout, or an HTTP 5xx. It feeds the
// fail-safe timer.
type UnreachableError struct{ Err error }

// Error implements error.
// Error implements error.
func (e *UnreachableError) Error() string { return "prometheus unreachable: " + e.Err.Error() }

// Unwrap returns the network or HTTP error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// QueryError means Prometheus answered and rejected the query (bad_data, execution errors, an unexpected result
// shape, a 4xx). Prometheus is up; the query or its configuration is wrong, so this never triggers the fail-safe.
type QueryError struct {
	// Type is Prometheus's errorType (bad_data, execution, ...) or "client" for problems found here.
	Type string
	Msg  string
}

// Error implements error.
func (e *QueryError) Error() string { return e.Type + ": " + e.Msg }

// Sample is an instant query's single value. NoData is true for an empty vector and for NaN: there was nothing
// to measure, which is not an outage.
type Sample struct {
	Value  float64
	NoData bool
}

// maxBody bounds how much of a response is read; the queries return one sample.
const maxBody = 1 << 20

type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

type apiData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

// Query evaluates q at time at (zero means Prometheus's now). It expects a scalar or a vector of at most one
// element, which is what the analysis queries return.
func (p *Prometheus) Query(ctx context.Context, q string, at time.Time) (Sample, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	form := url.Values{"query": {q}}
	if !at.IsZero() {
		form.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	endpoint := strings.TrimSuffix(p.URL, "/") + "/api/v1/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Sample{}, &QueryError{Type: "client", Msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if p.BearerTokenFile != "" {
		token, err := os.ReadFile(p.BearerTokenFile)
		if err != nil {
			return Sample{}, &QueryError{Type: "client", Msg: "reading the bearer token: " + err.Error()}
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := p.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, &UnreachableError{Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Sample{}, &UnreachableError{Err: fmt.Errorf("reading the response: %w", err)}
	}
	var r apiResponse
	jsonErr := json.Unmarshal(body, &r)
	if resp.StatusCode >= 500 {
		// 503 timeout/unavailable, 500 internal, or a proxy in front with no Prometheus behind it.
		msg := resp.Status
		if jsonErr == nil && r.Error != "" {
			msg += ": " + r.Error
		}
		return Sample{}, &UnreachableError{Err: errors.New(msg)}
	}
	if jsonErr != nil {
		return Sample{}, &QueryError{Type: "client", Msg: fmt.Sprintf("HTTP %d with a body that is not a "+
			"Prometheus API response: %v", resp.StatusCode, jsonErr)}
	}
	if r.Status != "success" {
		return Sample{}, &QueryError{Type: r.ErrorType, Msg: r.Error}
	}
	return parseResult(r.Data)
}

func parseResult(raw json.RawMessage) (Sample, error) {
	var d apiData
	if err := json.Unmarshal(raw, &d); err != nil {
		return Sample{}, &QueryError{Type: "client", Msg: "malformed data: " + err.Error()}
	}
	var pair []any
	switch d.ResultType {
	case "scalar":
		if err := json.Unmarshal(d.Result, &pair); err != nil {
			return Sample{}, &QueryError{Type: "client", Msg: "malformed scalar: " + err.Error()}
		}
	case "vector":
		var vec []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &vec); err != nil {
			return Sample{}, &QueryError{Type: "client", Msg: "malformed vector: " + err.Error()}
		}
		switch len(vec) {
		case 0:
			return Sample{NoData: true, Value: math.NaN()}, nil
		case 1:
			pair = vec[0].Value
		default:
			return Sample{}, &QueryError{Type: "client",
				Msg: fmt.Sprintf("%d series where one was expected (labels not aggregated away?)", len(vec))}
		}
	default:
		return Sample{}, &QueryError{Type: "client", Msg: "unexpected result type " + d.ResultType}
	}
	if len(pair) != 2 {
		return Sample{}, &QueryError{Type: "client", Msg: "sample is not a [time, value] pair"}
	}
	s, ok := pair[1].(string)
	if !ok {
		return Sample{}, &QueryError{Type: "client", Msg: "sample value is not a string"}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Sample{}, &QueryError{Type: "client", Msg: "sample value: " + err.Error()}
	}
	if math.IsNaN(v) {
		return Sample{NoData: true, Value: v}, nil
	}
	return Sample{Value: v}, nil
}

// Analyze runs the three canary queries for window at time at and classifies the outcome for Decide: any
// unreachable query makes the whole analysis Unreachable, any rejected query QueryFailed; values without data
// are NaN (Judge never passes NaN).
func (p *Prometheus) Analyze(ctx context.Context, m Metrics, t Target, window time.Duration, at time.Time) Analysis {
	q := m.Build(t, window)
	a := Analysis{Outcome: Measured, Window: window}
	for _, x := range []struct {
		query string
		into  *float64
	}{{q.Requests, &a.Requests}, {q.ErrorRate, &a.ErrorRate}, {q.P99, &a.P99}} {
		s, err := p.Query(ctx, x.query, at)
		var unreachable *UnreachableError
		switch {
		case errors.As(err, &unreachable):
			return Analysis{Outcome: Unreachable, Window: window, Err: err.Error()}
		case err != nil:
			return Analysis{Outcome: QueryFailed, Window: window, Err: err.Error()}
		case s.NoData:
			*x.into = math.NaN()
		default:
			*x.into = s.Value
		}
	}
	return a
}
