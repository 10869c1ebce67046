package extsync

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/time/rate"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// HTTP source limits.
const (
	MaxBodyBytes = 10 << 20
	HTTPTimeout  = 30 * time.Second
)

// Credentials are the HTTP credentials read from the sync's Secret. A bearer token wins over basic auth.
type Credentials struct {
	BearerToken, Username, Password string
}

func (c Credentials) any() bool { return c.BearerToken != "" || c.Username != "" || c.Password != "" }

// HTTPSource fetches records through the SSRF guard, with one rate limiter per target host shared by every sync.
type HTTPSource struct {
	guard  *netguard.Guard
	client *http.Client
	rps    rate.Limit
	burst  int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// NewHTTPSource returns a source dialling through guard; rps and burst size each host's limiter.
func NewHTTPSource(guard *netguard.Guard, tlsConfig *tls.Config, rps float64, burst int) *HTTPSource {
	if burst < 1 {
		burst = 1
	}
	return &HTTPSource{guard: guard, client: guard.Client(HTTPTimeout, tlsConfig), rps: rate.Limit(rps), burst: burst, limiters: map[string]*rate.Limiter{}}
}

func (s *HTTPSource) limiter(host string) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limiters[host]
	if !ok {
		l = rate.NewLimiter(s.rps, s.burst)
		s.limiters[host] = l
	}
	return l
}

// Redact keeps only the scheme and host of a URL: paths and queries often carry tokens.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<url>"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// Fetch reads the records of src. Errors name the redacted URL and never include the response body.
func (s *HTTPSource) Fetch(ctx context.Context, src *fleetv1alpha1.HTTPSource, creds Credentials) ([]Record, error) {
	red := Redact(src.URL)
	// Admission checked the URL already; checked again because a stored object may predate the webhook or have
	// bypassed it. The dial-time check of the resolved address still runs on every connection.
	u, err := s.guard.CheckURL(src.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", red, redactErr(err))
	}
	if creds.any() && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: credentials are only sent over https", red)
	}
	if err := s.limiter(u.Host).Wait(ctx); err != nil {
		return nil, fmt.Errorf("%s: waiting for the per-host rate limiter: %w", red, err)
	}
	method := src.Method
	if method == "" {
		method = http.MethodGet
	}
	ctx, cancel := context.WithTimeout(ctx, HTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, src.URL, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", red, redactErr(err))
	}
	req.Header.Set("Accept", "application/json")
	switch {
	case creds.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+creds.BearerToken)
	case creds.Username != "" || creds.Password != "":
		req.SetBasicAuth(creds.Username, creds.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", red, redactErr(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("%s: HTTP %d", red, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the response: %s", red, redactErr(err))
	}
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%s: response larger than %d bytes", red, MaxBodyBytes)
	}
	recs, err := ExtractRecords(body, src.RecordsPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", red, err)
	}
	return recs, nil
}

// redactErr drops the URL a *url.Error carries, keeping what went wrong.
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}
