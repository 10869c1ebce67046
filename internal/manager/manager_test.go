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
	g.Expect(o.EnforceCrossNamespaceDiscoveryAuthz).To(BeTrue(), "a discovery may write into another namespace only when its author may")
}

func TestTenantPolicyEnforcementIsOnByDefault(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	g.Expect(o.EnforceTenantPolicies).To(BeTrue(), "a TenantPolicy binds its subjects on a default install")
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Lookup("enable-tenant-policy-enforcement").DefValue).To(Equal("true"))
	g.Expect(fs.Parse([]string{"--enable-tenant-policy-enforcement=false"})).To(Succeed())
	g.Expect(o.EnforceTenantPolicies).To(BeFalse())
}

func TestCrossNamespaceDiscoveryAuthzCanBeTurnedOff(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Lookup("enforce-cross-namespace-discovery-authz").DefValue).To(Equal("true"))
	g.Expect(fs.Parse([]string{"--enforce-cross-namespace-discovery-authz=false"})).To(Succeed())
	g.Expect(o.EnforceCrossNamespaceDiscoveryAuthz).To(BeFalse())
}

func TestNewRejectsUnknownSelections(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	o.Groups = []string{"gnmic", "nope"}
	_, err := New(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, o)
	g.Expect(err).To(MatchError(ContainSubstring(`unknown group "nope"`)))
}

func TestRegistryFlags(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	g.Expect(o.RegistryBindAddress).To(Equal(":9090"))
	g.Expect(o.RegistryTokenAudience).To(Equal("agentrax-registry"))
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--registry-bind-address=127.0.0.1:9191", "--registry-ttl=2m", "--registry-health-interval=10s",
		"--registry-token-secret=ops/registry-token", "--registry-writers=team-a/orchestrator,team-b/bot",
		"--registry-cluster-writers=ops/admin", "--registry-namespace=ops",
	})).To(Succeed())
	s, err := o.registrySettings()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.BindAddress).To(Equal("127.0.0.1:9191"))
	g.Expect(s.TTL).To(Equal(2 * time.Minute))
	g.Expect(s.HealthInterval).To(Equal(10 * time.Second))
	g.Expect(s.Writers).To(Equal([]string{"team-a/orchestrator", "team-b/bot"}))
	g.Expect(s.ClusterWriters).To(Equal([]string{"ops/admin"}))
	g.Expect(s.Namespace).To(Equal("ops"))
}

// TestRegistrySettings: the TTL comes from the options alone (AGENTRAX_REGISTRY_TTL is an alias of the flag now,
// TestRegistryTTLAlias); bad settings stop the manager unless the registry is off.
func TestRegistrySettings(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(*Options)
		wantTTL time.Duration
		wantErr string
	}{
		{"defaults", func(*Options) {}, 0, ""},
		{"TTL from the options", func(o *Options) { o.RegistryTTL = time.Hour }, time.Hour, ""},
		{"TTL below the minimum", func(o *Options) { o.RegistryTTL = 10 * time.Second }, 0, "between 30s and 24h0m0s"},
		{"disabled: nothing is checked", func(o *Options) { o.RegistryBindAddress = "0"; o.RegistryTTL = time.Second }, time.Second, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// The old variable no longer reaches the options behind the command line's back.
			t.Setenv(RegistryTTLEnv, "2m")
			t.Setenv("POD_NAMESPACE", "quartet-system")
			o := DefaultOptions()
			tc.edit(&o)
			s, err := o.registrySettings()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.TTL).To(Equal(tc.wantTTL))
			if s.Enabled() {
				g.Expect(s.Namespace).To(Equal("quartet-system"))
			}
		})
	}
}

// TestExternalSourceAllowCIDRs: private ranges are accepted; loopback, metadata and malformed prefixes are
// refused with an error naming the flag.
func TestExternalSourceAllowCIDRs(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--external-source-allow-cidrs=10.20.0.0/16, fd00:1::/64"})).To(Succeed())
	allowed, err := ParseExternalSourceAllowCIDRs(o.ExternalSourceAllowCIDRs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allowed).To(HaveLen(2))
	for _, bad := range []string{"127.0.0.0/8", "169.254.169.254/32", "10.20.0.1/16", "ten"} {
		_, err := ParseExternalSourceAllowCIDRs([]string{bad})
		g.Expect(err).To(MatchError(ContainSubstring("--external-source-allow-cidrs: %q", bad)))
	}
}
