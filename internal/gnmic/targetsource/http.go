package targetsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// MaxPageBytes is the largest inventory page read (64 MiB).
const MaxPageBytes = 64 << 20

// acceptHeader asks for JSON, or YAML.
const acceptHeader = "application/json, application/yaml;q=0.9, text/yaml;q=0.8, */*;q=0.1"

// HTTPCredentials are the resolved credentials of an HTTP source; at most one kind is set.
type HTTPCredentials struct {
	BasicUser, BasicPassword string
	Basic                    bool
	TokenScheme, Token       string
	HeaderName, HeaderValue  string
}

// HTTPRequest describes one fetch of an HTTP inventory.
type HTTPRequest struct {
	URL     string
	Method  string
	Body    string
	Headers map[string]string
	Creds   HTTPCredentials
	// NextField, RequestParam and MaxPages configure pagination; MaxPages 0 means one page.
	NextField    string
	RequestParam string
	MaxPages     int
}

// HTTPResult holds each page's parsed document.
type HTTPResult struct {
	Pages     []any
	Truncated bool
	// TruncatedReason says why the result is incomplete.
	TruncatedReason string
}

// ErrCrossOrigin is returned when a next page or a redirect would leave the source's scheme and host:port.
var ErrCrossOrigin = errors.New("refusing to leave the source's origin")

// maxRedirects is how many same-origin redirects one page may take (Go's own default).
const maxRedirects = 10

// sameOrigin reports whether b has a's scheme, host and port; host case and an explicit default port do not matter.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) &&
		effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// originGuard returns a copy of client that refuses any redirect leaving origin. Go's client forwards custom
// headers, and so the auth.header secret, to whatever host a redirect names (it strips only Authorization and
// cookies, and even those only across domains): refusing is the only way to keep every credential kind at home,
// and the same rule already holds for pagination. A redirect within the origin keeps every header.
func originGuard(client *http.Client, origin *url.URL) *http.Client {
	guarded := *client
	inner := client.CheckRedirect
	guarded.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if !sameOrigin(origin, r.URL) {
			return fmt.Errorf("%w: the inventory redirected to %s (source is %s://%s); point spec.source.http.url at the final location",
				ErrCrossOrigin, r.URL.Redacted(), origin.Scheme, origin.Host)
		}
		if inner != nil {
			return inner(r, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &guarded
}

// TLSConfig builds the client TLS configuration: TLS 1.2 at least, an optional CA bundle added to nothing else
// (it replaces the system roots), and an optional client certificate.
func TLSConfig(insecure bool, caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // user opt-in
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if len(certPEM) > 0 || len(keyPEM) > 0 {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// FetchHTTP reads every page of an HTTP inventory. A Link rel="next" header wins over nextField; a next page, and
// every redirect, must keep the scheme and host:port of the source URL. A repeated URL or reaching maxPages with a next page left marks
// the result Truncated. Any non-2xx answer, or a page over 64 MiB, fails the fetch.
func FetchHTTP(ctx context.Context, client *http.Client, req HTTPRequest) (HTTPResult, error) {
	origin, err := url.Parse(req.URL)
	if err != nil || (origin.Scheme != "http" && origin.Scheme != "https") || origin.Host == "" {
		return HTTPResult{}, fmt.Errorf("url %q must be an absolute http(s) URL", req.URL)
	}
	client = originGuard(client, origin)
	maxPages := req.MaxPages
	if maxPages < 1 {
		maxPages = 1
	}
	var res HTTPResult
	visited := map[string]bool{}
	current := origin
	for {
		if visited[current.String()] {
			res.Truncated, res.TruncatedReason = true, fmt.Sprintf("page %s was already read (pagination loop)", current)
			return res, nil
		}
		visited[current.String()] = true
		doc, next, err := fetchPage(ctx, client, req, current)
		if err != nil {
			return res, err
		}
		res.Pages = append(res.Pages, doc)
		if next == nil {
			return res, nil
		}
		if !sameOrigin(origin, next) {
			return res, fmt.Errorf("%w: next page %s (source is %s://%s)", ErrCrossOrigin, next.Redacted(), origin.Scheme, origin.Host)
		}
		if len(res.Pages) >= maxPages {
			res.Truncated, res.TruncatedReason = true, fmt.Sprintf("maxPages (%d) reached with more pages left", maxPages)
			return res, nil
		}
		current = next
	}
}

func fetchPage(ctx context.Context, client *http.Client, req HTTPRequest, u *url.URL) (any, *url.URL, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if method == http.MethodPost && req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, err
	}
	hr.Header.Set("Accept", acceptHeader)
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	switch c := req.Creds; {
	case c.Basic:
		hr.SetBasicAuth(c.BasicUser, c.BasicPassword)
	case c.Token != "":
		scheme := c.TokenScheme
		if scheme == "" {
			scheme = "Bearer"
		}
		hr.Header.Set("Authorization", scheme+" "+c.Token)
	case c.HeaderName != "":
		hr.Header.Set(c.HeaderName, c.HeaderValue)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, fmt.Errorf("GET %s: HTTP %d", u.Redacted(), resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", u.Redacted(), err)
	}
	if len(data) > MaxPageBytes {
		return nil, nil, fmt.Errorf("page %s is larger than %d bytes", u.Redacted(), MaxPageBytes)
	}
	doc, err := ParseDocument(data)
	if err != nil {
		return nil, nil, fmt.Errorf("page %s: %w", u.Redacted(), err)
	}
	if link := nextLink(resp.Header.Values("Link")); link != "" {
		next, err := u.Parse(link)
		if err != nil {
			return nil, nil, fmt.Errorf("link header: %w", err)
		}
		return doc, next, nil
	}
	if req.NextField == "" {
		return doc, nil, nil
	}
	token := scalarString(lookupPath(doc, req.NextField))
	if token == "" {
		return doc, nil, nil
	}
	if req.RequestParam != "" && !strings.Contains(token, "/") {
		next := *u
		q := next.Query()
		q.Set(req.RequestParam, token)
		next.RawQuery = q.Encode()
		return doc, &next, nil
	}
	next, err := u.Parse(token)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", req.NextField, err)
	}
	return doc, next, nil
}

// nextLink returns the target of the rel="next" entry of Link headers.
func nextLink(values []string) string {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			segs := strings.Split(part, ";")
			target := strings.TrimSpace(segs[0])
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range segs[1:] {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target[1 : len(target)-1]
					}
				}
			}
		}
	}
	return ""
}

// lookupPath follows a dot-separated path through maps.
func lookupPath(doc any, path string) any {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}
