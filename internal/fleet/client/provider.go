package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the credentials Secret.
const (
	SecretKeyBaseURL  = "base-url"
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	// SecretKeyCA is optional: a PEM bundle trusted instead of the system roots (e.g. for a local server).
	SecretKeyCA = "ca.crt"
)

// ErrNotConfigured means neither a credentials Secret nor a URL was configured.
var ErrNotConfigured = errors.New("the Fleet Management API is not configured: set --fleet-credentials-secret")

// ProviderOptions configure where a Provider finds its settings.
type ProviderOptions struct {
	// Secret holds base-url, username, password and optionally ca.crt.
	Secret types.NamespacedName
	// URL overrides the Secret's base-url when set.
	URL string
	// RPS and Burst size the token bucket shared by every client the Provider builds.
	RPS   float64
	Burst int
	// JSON selects the protojson codec.
	JSON bool
}

// Provider builds the Client lazily from the credentials Secret (read straight from the API server: the manager
// does not cache Secrets) and keeps it until Invalidate. Every Client it builds shares one token bucket, so the
// rate budget survives credential rotation.
type Provider struct {
	reader  ctrlclient.Reader
	opts    ProviderOptions
	limiter *rate.Limiter

	mu     sync.Mutex
	client *Client
}

// NewProvider returns a Provider reading the Secret through reader.
func NewProvider(reader ctrlclient.Reader, opts ProviderOptions) *Provider {
	if opts.RPS <= 0 {
		opts.RPS = DefaultRPS
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	return &Provider{reader: reader, opts: opts, limiter: rate.NewLimiter(rate.Limit(opts.RPS), opts.Burst)}
}

// Limiter is the shared token bucket.
func (p *Provider) Limiter() *rate.Limiter { return p.limiter }

// Client returns the cached Client, building it from the Secret on first use.
func (p *Provider) Client(ctx context.Context) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		return p.client, nil
	}
	if p.opts.Secret.Name == "" {
		return nil, ErrNotConfigured
	}
	secret := &corev1.Secret{}
	if err := p.reader.Get(ctx, p.opts.Secret, secret); err != nil {
		return nil, fmt.Errorf("reading the Fleet credentials Secret %s: %w", p.opts.Secret, err)
	}
	base := string(secret.Data[SecretKeyBaseURL])
	if p.opts.URL != "" {
		base = p.opts.URL
	}
	var c *Client
	c, err := New(Config{
		// A 401 from any caller drops exactly this client (not a newer one built meanwhile).
		OnUnauthenticated: func() { p.drop(c) },
		BaseURL:           base,
		Username:          string(secret.Data[SecretKeyUsername]),
		Password:          string(secret.Data[SecretKeyPassword]),
		CAPEM:             secret.Data[SecretKeyCA],
		Limiter:           p.limiter,
		JSON:              p.opts.JSON,
	})
	if err != nil {
		return nil, fmt.Errorf("credentials Secret %s: %w", p.opts.Secret, err)
	}
	p.client = c
	return c, nil
}

// drop forgets c if it is still the cached Client.
func (p *Provider) drop(c *Client) {
	p.mu.Lock()
	if p.client == c {
		p.client = nil
	}
	p.mu.Unlock()
}

// Invalidate drops the cached Client so the next call re-reads the Secret (after a 401, for example).
func (p *Provider) Invalidate() {
	p.mu.Lock()
	p.client = nil
	p.mu.Unlock()
}
