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

// MaxTotalBytes bounds all pages of one fetch together (64 MiB): without it maxPages pages of MaxPageBytes each
// would be held in memory at once.
const MaxTotalBytes = 64 << 20

// RedactURL is u as it may appear in status, events and logs: no user info, and every query value replaced,
// since inventories commonly take an API token as a query parameter (?api_key=…); the parameter names stay, so
// the message still says which URL it was.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{"redacted"}
		}
		c.RawQuery = q.Encode()
	}
	return c.String()
}

// RedactRawURL is RedactURL of a URL string; a string that does not parse is not shown at all.
func RedactRawURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	return RedactURL(u)
}

// redactError rewrites the URL Go's HTTP client puts in its errors (Get "https://…?token=…": …).
func redactError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		c := *ue
		c.URL = RedactRawURL(ue.URL)
		return &c
	}
	return err
}

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
				ErrCrossOrigin, RedactURL(r.URL), origin.Scheme, origin.Host)
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
// the result Truncated. Any non-2xx answer, a page over 64 MiB, or pages over 64 MiB together fail the fetch.
// URLs in errors are redacted (RedactURL).
func FetchHTTP(ctx context.Context, client *http.Client, req HTTPRequest) (HTTPResult, error) {
	origin, err := url.Parse(req.URL)
	if err != nil || (origin.Scheme != "http" && origin.Scheme != "https") || origin.Host == "" {
		return HTTPResult{}, fmt.Errorf("url %s must be an absolute http(s) URL", RedactRawURL(req.URL))
	}
	client = originGuard(client, origin)
	maxPages := req.MaxPages
	if maxPages < 1 {
		maxPages = 1
	}
	var res HTTPResult
	visited := map[string]bool{}
	current := origin
	budget := int64(MaxTotalBytes)
	for {
		if visited[current.String()] {
			res.Truncated, res.TruncatedReason = true, fmt.Sprintf("page %s was already read (pagination loop)", RedactURL(current))
			return res, nil
		}
		visited[current.String()] = true
		doc, next, size, err := fetchPage(ctx, client, req, current, budget)
		if err != nil {
			return res, redactError(err)
		}
		budget -= size
		res.Pages = append(res.Pages, doc)
		if next == nil {
			return res, nil
		}
		if !sameOrigin(origin, next) {
			return res, fmt.Errorf("%w: next page %s (source is %s://%s)", ErrCrossOrigin, RedactURL(next), origin.Scheme, origin.Host)
		}
		if len(res.Pages) >= maxPages {
			res.Truncated, res.TruncatedReason = true, fmt.Sprintf("maxPages (%d) reached with more pages left", maxPages)
			return res, nil
		}
		current = next
	}
}

// fetchPage reads one page of at most min(MaxPageBytes, budget) bytes and returns its document, the next page
// and its size.
func fetchPage(ctx context.Context, client *http.Client, req HTTPRequest, u *url.URL, budget int64) (any, *url.URL, int64, error) {
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
		return nil, nil, 0, err
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
		return nil, nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, 0, fmt.Errorf("%s %s: HTTP %d", method, RedactURL(u), resp.StatusCode)
	}
	limit := min(int64(MaxPageBytes), budget)
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("reading %s: %w", RedactURL(u), err)
	}
	if int64(len(data)) > limit {
		if limit < MaxPageBytes {
			return nil, nil, 0, fmt.Errorf("page %s: the inventory's pages together are larger than %d bytes", RedactURL(u), MaxTotalBytes)
		}
		return nil, nil, 0, fmt.Errorf("page %s is larger than %d bytes", RedactURL(u), MaxPageBytes)
	}
	size := int64(len(data))
	doc, err := ParseDocument(data)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("page %s: %w", RedactURL(u), err)
	}
	if link := nextLink(resp.Header.Values("Link")); link != "" {
		next, err := u.Parse(link)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("link header: %w", err)
		}
		return doc, next, size, nil
	}
	if req.NextField == "" {
		return doc, nil, size, nil
	}
	token := scalarString(lookupPath(doc, req.NextField))
	if token == "" {
		return doc, nil, size, nil
	}
	if req.RequestParam != "" && !strings.Contains(token, "/") {
		next := *u
		q := next.Query()
		q.Set(req.RequestParam, token)
		next.RawQuery = q.Encode()
		return doc, &next, size, nil
	}
	next, err := u.Parse(token)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s: %w", req.NextField, err)
	}
	return doc, next, size, nil
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
