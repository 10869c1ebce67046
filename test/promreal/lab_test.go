// Package promreal runs the canary analysis against a real Prometheus (Debian's `prometheus` package; see
// hack/ensure-prometheus.sh) scraping small HTTP servers started by the tests (internal/testenv/promlab). Each server
// plays one variant of an agent and exposes http_requests_total{code} and the http_request_duration_seconds
// histogram; the tests control its request rate, error share and latency, and the labels Prometheus attaches to
// the scrape are the ones a PodMonitor gives agent pods (namespace, app_kubernetes_io_name, agentrax_io_variant).
//
// The same Prometheus checks the operator's monitoring: every PrometheusRule of config/prometheus loads, every
// Grafana dashboard query parses, and both name only metrics a scrape of the running operator serves (rules_test.go,
// scrape_test.go).
package promreal

import (
	"math"
	"testing"
	"time"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

const namespace = "team-a"

// app is one variant of an agent.
type app struct{ *promlab.App }

func newApp(t *testing.T, name, variant string) *app {
	return &app{promlab.StartApp(t, namespace, name, variant)}
}

func (a *app) set(errShare, latency float64) { a.Set(errShare, latency) }

func (a *app) target() rollout.Target {
	return rollout.Target{Namespace: namespace, Name: a.Name, Variant: a.Variant}
}

// traffic sends requests to an agent, split between stable and canary by the canary weight the route last
// accepted, until the test ends.
type traffic struct{ *promlab.Traffic }

func (tr *traffic) set(rps float64, weight int32) { tr.Set(rps, weight) }

func startTraffic(t *testing.T, rps float64, stable, canary *app) *traffic {
	var c *promlab.App
	if canary != nil {
		c = canary.App
	}
	tr := promlab.StartTraffic(rps, stable.App, c)
	t.Cleanup(tr.Stop)
	return &traffic{tr}
}

// promServer is a Prometheus process scraping the apps every second.
type promServer struct{ *promlab.Prometheus }

func startPrometheus(t *testing.T, apps ...*app) *promServer {
	t.Helper()
	var as []*promlab.App
	for _, a := range apps {
		as = append(as, a.App)
	}
	return &promServer{promlab.StartPrometheus(t, as...)}
}

func (p *promServer) stop() { p.Stop() }

func (p *promServer) client() *rollout.Prometheus {
	return &rollout.Prometheus{URL: p.URL, Timeout: 2 * time.Second}
}

var isNaN = math.IsNaN
