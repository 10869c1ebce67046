package manager

import (
	"context"
	"flag"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

func TestFlags(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--groups=gnmic, fleet", "--controllers=gnmic-target", "--watch-namespaces=a,b,",
		"--kube-api-qps=20", "--kube-api-burst=40", "--leader-elect", "--metrics-bind-address=0",
		"--api-bind-address=:8082", "--targetsource-concurrency=7", "--pprof-bind-address=127.0.0.1:6060",
		"--agentdeployment-concurrency=8", "--prometheus-url=http://prom:9090", "--prometheus-failsafe-timeout=90s",
		"--canary-analysis-interval=5s",
	})).To(Succeed())
	g.Expect(o.PrometheusURL).To(Equal("http://prom:9090"))
	g.Expect(o.PrometheusFailsafeTimeout).To(Equal(90 * time.Second))
	g.Expect(o.CanaryAnalysisInterval).To(Equal(5 * time.Second))
	g.Expect(o.AgentDeploymentConcurrency).To(Equal(8))
	g.Expect(o.Groups).To(Equal([]string{"gnmic", "fleet"}))
	g.Expect(o.Controllers).To(Equal([]string{"gnmic-target"}))
	g.Expect(o.WatchNamespaces).To(Equal([]string{"a", "b"}))
	g.Expect(o.KubeAPIQPS).To(Equal(20.0))
	g.Expect(o.KubeAPIBurst).To(Equal(40))
	g.Expect(o.LeaderElect).To(BeTrue())
	g.Expect(o.MetricsBindAddress).To(Equal("0"))
	g.Expect(o.APIBindAddress).To(Equal(":8082"))
	g.Expect(o.TargetSourceConcurrency).To(Equal(7))
	g.Expect(o.PprofBindAddress).To(Equal("127.0.0.1:6060"))
}

func TestDefaultsAreProductionSafe(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	g.Expect(o.SecureMetrics).To(BeTrue(), "metrics are served over HTTPS with authn/authz by default")
	g.Expect(o.EnableHTTP2).To(BeFalse())
	g.Expect(o.Groups).To(ConsistOf("fleet", "gnmic", "agentrax", "gitops"))
	g.Expect(o.Controllers).To(BeEmpty())
	g.Expect(o.TargetSourceConcurrency).To(Equal(4))
	g.Expect(o.PrometheusFailsafeTimeout).To(Equal(60*time.Second), "the fail-safe timeout of the design")
	g.Expect(o.APIBindAddress).To(BeEmpty(), "the refresh API is off unless asked for")
	g.Expect(o.PprofBindAddress).To(BeEmpty(), "pprof is unauthenticated and off unless asked for")
}

func TestNewRejectsUnknownSelections(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	o.Groups = []string{"gnmic", "nope"}
	_, err := New(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, o)
	g.Expect(err).To(MatchError(ContainSubstring(`unknown group "nope"`)))
}
