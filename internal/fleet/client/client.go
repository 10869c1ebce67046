// Package client calls the Grafana Fleet Management API through the Connect clients of the official SDK
// (github.com/grafana/fleet-management-api), behind one token bucket shared by every service, with Prometheus
// metrics and OpenTelemetry spans around each call.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	"github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1/collectorv1connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1/pipelinev1connect"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/time/rate"

	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// Defaults of the shared token bucket (--fleet-api-rps, --fleet-api-burst).
const (
	DefaultRPS   = 3
	DefaultBurst = 50
)

// Config is what a Client needs.
type Config struct {
	// BaseURL is the Fleet Management API URL; it must be https. A trailing service path
	// (/pipeline.v1.PipelineService or /collector.v1.CollectorService) is stripped.
	BaseURL string
	// Username and Password are sent as HTTP Basic auth (stack ID and access token in Grafana Cloud).
	Username, Password string
	// CAPEM, when set, replaces the system roots for verifying the server (e.g. a local Fleet server).
	CAPEM []byte
	// Limiter is the token bucket every call waits on; nil builds one with the defaults. Share one Limiter
	// between every Client of a process so the budget is global.
	Limiter *rate.Limiter
	// JSON selects the protojson codec instead of binary protobuf.
	JSON bool
	// Timeout bounds each call, limiter wait excluded; 0 means 30 s.
	Timeout time.Duration
	// OnUnauthenticated, when set, is called after any call answered 401, whichever caller made it (a finalizer,
	// an orphan delete, a webhook): the Provider uses it to drop this Client so the next call re-reads the Secret.
	OnUnauthenticated func()
}

// Client calls the PipelineService and CollectorService.
type Client struct {
	pipelines  pipelinev1connect.PipelineServiceClient
	collectors collectorv1connect.CollectorServiceClient
	limiter    *rate.Limiter
	timeout    time.Duration
	onUnauth   func()
}

// NormalizeBaseURL checks that raw is an https URL and strips a trailing service path and slashes.
func NormalizeBaseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("fleet API URL: %w", err)
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("fleet API URL %q: must be https", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("fleet API URL %q: has no host", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("fleet API URL %q: must not carry credentials, a query or a fragment", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	for _, svc := range []string{"/" + pipelinev1connect.PipelineServiceName, "/" + collectorv1connect.CollectorServiceName} {
		p = strings.TrimSuffix(p, svc)
	}
	u.Path = strings.TrimRight(p, "/")
	u.RawPath = ""
	return u.String(), nil
}

// New builds a Client.
func New(cfg Config) (*Client, error) {
	base, err := NormalizeBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Username == "" || cfg.Password == "" {
		return nil, errors.New("fleet API credentials: username and password are required")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cfg.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CAPEM) {
			return nil, errors.New("fleet API CA: no PEM certificate found")
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	httpClient := &http.Client{Transport: transport}
	limiter := cfg.Limiter
	if limiter == nil {
		limiter = rate.NewLimiter(DefaultRPS, DefaultBurst)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.Username+":"+cfg.Password))
	opts := []connect.ClientOption{connect.WithInterceptors(connect.UnaryInterceptorFunc(
		func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", auth)
				userAgent := "quartet-operator"
				if caller, ok := ctx.Value(callerKey{}).(string); ok && caller != "" {
					userAgent += " (" + caller + ")"
				}
				req.Header().Set("User-Agent", userAgent)
				return next(ctx, req)
			}
		}))}
	if cfg.JSON {
		opts = append(opts, connect.WithProtoJSON())
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	return &Client{
		pipelines:  pipelinev1connect.NewPipelineServiceClient(httpClient, base, opts...),
		collectors: collectorv1connect.NewCollectorServiceClient(httpClient, base, opts...),
		limiter:    limiter,
		timeout:    timeout,
		onUnauth:   cfg.OnUnauthenticated,
	}, nil
}

type callerKey struct{}

// WithCaller names the purpose of the calls made with ctx (e.g. "drift-check"); it is sent in the User-Agent,
// "quartet-operator (<caller>)", so Fleet's logs (and the local test server) can tell background checks apart.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// call waits for a token, then runs fn in a span, recording the metrics.
func call[Res any](ctx context.Context, c *Client, operation string, fn func(context.Context) (*connect.Response[Res], error)) (*Res, error) {
	ctx, span := telemetry.StartSpan(ctx, "fleet", "fleet."+operation, attribute.String("rpc.method", operation))
	start := time.Now()
	if err := c.limiter.Wait(ctx); err != nil {
		telemetry.EndSpan(span, err)
		return nil, fmt.Errorf("waiting for the Fleet API rate limiter: %w", err)
	}
	waited := time.Since(start)
	limiterWait.Observe(waited.Seconds())
	span.SetAttributes(attribute.Float64("fleet.limiter_wait_seconds", waited.Seconds()))
	requestsTotal.WithLabelValues(operation).Inc()
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	sent := time.Now()
	res, err := fn(callCtx)
	status := strconv.Itoa(HTTPStatus(err))
	requestDuration.WithLabelValues(operation, status).Observe(time.Since(sent).Seconds())
	span.SetAttributes(attribute.String("http.response.status_code", status))
	if err != nil {
		if c.onUnauth != nil && IsUnauthenticated(err) {
			c.onUnauth()
		}
		errorsTotal.WithLabelValues(operation, status).Inc()
		telemetry.EndSpan(span, err)
		return nil, err
	}
	telemetry.EndSpan(span, nil)
	return res.Msg, nil
}

// UpsertPipeline creates or replaces the pipeline named p.Name; every field must be set, since the whole object
// is replaced.
func (c *Client) UpsertPipeline(ctx context.Context, p *pipelinev1.Pipeline, validateOnly bool) (*pipelinev1.Pipeline, error) {
	return call(ctx, c, "UpsertPipeline", func(ctx context.Context) (*connect.Response[pipelinev1.Pipeline], error) {
		return c.pipelines.UpsertPipeline(ctx, connect.NewRequest(&pipelinev1.UpsertPipelineRequest{Pipeline: p, ValidateOnly: validateOnly}))
	})
}

// CreatePipeline creates the pipeline named p.Name; Fleet answers already_exists (409) when the name is taken, which
// is how a write tells its own pipeline from one made elsewhere without a race.
func (c *Client) CreatePipeline(ctx context.Context, p *pipelinev1.Pipeline) (*pipelinev1.Pipeline, error) {
	return call(ctx, c, "CreatePipeline", func(ctx context.Context) (*connect.Response[pipelinev1.Pipeline], error) {
		return c.pipelines.CreatePipeline(ctx, connect.NewRequest(&pipelinev1.CreatePipelineRequest{Pipeline: p}))
	})
}

// UpdatePipeline replaces the existing pipeline p.Id (every field is written); not_found when it is gone.
func (c *Client) UpdatePipeline(ctx context.Context, p *pipelinev1.Pipeline) (*pipelinev1.Pipeline, error) {
	return call(ctx, c, "UpdatePipeline", func(ctx context.Context) (*connect.Response[pipelinev1.Pipeline], error) {
		return c.pipelines.UpdatePipeline(ctx, connect.NewRequest(&pipelinev1.UpdatePipelineRequest{Pipeline: p}))
	})
}

// GetPipelineID returns the server ID of the pipeline named name.
func (c *Client) GetPipelineID(ctx context.Context, name string) (string, error) {
	res, err := call(ctx, c, "GetPipelineID", func(ctx context.Context) (*connect.Response[pipelinev1.GetPipelineIDResponse], error) {
		return c.pipelines.GetPipelineID(ctx, connect.NewRequest(&pipelinev1.GetPipelineIDRequest{Name: name}))
	})
	if err != nil {
		return "", err
	}
	return res.GetId(), nil
}

// GetPipeline returns the pipeline with the server ID id.
func (c *Client) GetPipeline(ctx context.Context, id string) (*pipelinev1.Pipeline, error) {
	return call(ctx, c, "GetPipeline", func(ctx context.Context) (*connect.Response[pipelinev1.Pipeline], error) {
		return c.pipelines.GetPipeline(ctx, connect.NewRequest(&pipelinev1.GetPipelineRequest{Id: id}))
	})
}

// DeletePipeline deletes the pipeline with the server ID id.
func (c *Client) DeletePipeline(ctx context.Context, id string) error {
	_, err := call(ctx, c, "DeletePipeline", func(ctx context.Context) (*connect.Response[pipelinev1.DeletePipelineResponse], error) {
		return c.pipelines.DeletePipeline(ctx, connect.NewRequest(&pipelinev1.DeletePipelineRequest{Id: id}))
	})
	return err
}

// ListPipelines lists pipelines, optionally filtered by config type and enabled.
func (c *Client) ListPipelines(ctx context.Context, req *pipelinev1.ListPipelinesRequest) ([]*pipelinev1.Pipeline, error) {
	res, err := call(ctx, c, "ListPipelines", func(ctx context.Context) (*connect.Response[pipelinev1.Pipelines], error) {
		return c.pipelines.ListPipelines(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return nil, err
	}
	return res.GetPipelines(), nil
}

// GetCollector returns the collector with ID id.
func (c *Client) GetCollector(ctx context.Context, id string) (*collectorv1.Collector, error) {
	return call(ctx, c, "GetCollector", func(ctx context.Context) (*connect.Response[collectorv1.Collector], error) {
		return c.collectors.GetCollector(ctx, connect.NewRequest(&collectorv1.GetCollectorRequest{Id: id}))
	})
}

// ListCollectors lists the collectors matching every matcher (all of them with none).
func (c *Client) ListCollectors(ctx context.Context, matchers []string) ([]*collectorv1.Collector, error) {
	res, err := call(ctx, c, "ListCollectors", func(ctx context.Context) (*connect.Response[collectorv1.Collectors], error) {
		return c.collectors.ListCollectors(ctx, connect.NewRequest(&collectorv1.ListCollectorsRequest{Matchers: matchers}))
	})
	if err != nil {
		return nil, err
	}
	return res.GetCollectors(), nil
}

// UpdateCollector replaces the collector (every field is written).
func (c *Client) UpdateCollector(ctx context.Context, col *collectorv1.Collector) (*collectorv1.Collector, error) {
	return call(ctx, c, "UpdateCollector", func(ctx context.Context) (*connect.Response[collectorv1.Collector], error) {
		return c.collectors.UpdateCollector(ctx, connect.NewRequest(&collectorv1.UpdateCollectorRequest{Collector: col}))
	})
}

// BulkUpdateCollectors applies ops to the remote attributes of every collector in ids, atomically.
func (c *Client) BulkUpdateCollectors(ctx context.Context, ids []string, ops []*collectorv1.Operation) error {
	_, err := call(ctx, c, "BulkUpdateCollectors", func(ctx context.Context) (*connect.Response[collectorv1.BulkUpdateCollectorsResponse], error) {
		return c.collectors.BulkUpdateCollectors(ctx, connect.NewRequest(&collectorv1.BulkUpdateCollectorsRequest{Ids: ids, Ops: ops}))
	})
	return err
}
