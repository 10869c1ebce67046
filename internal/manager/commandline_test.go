package manager

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// parse runs ParseCommandLine as the binary does, with the given arguments and environment.
func parse(args []string, environ ...string) (CommandLine, string, error) {
	var out bytes.Buffer
	c, err := ParseCommandLine("manager", args, environ, &out)
	return c, out.String(), err
}

// TestSubscriptionEnvironmentConfiguresTheManager: OLM's Subscription spec.config can set env but never args, so
// everything an OLM install needs must be reachable through QUARTET_* variables.
func TestSubscriptionEnvironmentConfiguresTheManager(t *testing.T) {
	g := NewWithT(t)
	c, _, err := parse(nil,
		"QUARTET_FLEET_CREDENTIALS_SECRET=quartet-operator/fleet-credentials",
		"QUARTET_PROMETHEUS_URL=http://prometheus.monitoring.svc:9090",
		"QUARTET_PROMETHEUS_FAILSAFE_TIMEOUT=90s",
		"QUARTET_GROUPS=fleet,agentrax,gitops",
		"QUARTET_LEADER_ELECT=true",
		"QUARTET_LOG_LEVEL=debug",
	)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Options.FleetCredentialsSecret).To(Equal("quartet-operator/fleet-credentials"))
	g.Expect(c.Options.PrometheusURL).To(Equal("http://prometheus.monitoring.svc:9090"))
	g.Expect(c.Options.PrometheusFailsafeTimeout).To(Equal(90 * time.Second))
	g.Expect(c.Options.Groups).To(Equal([]string{"fleet", "agentrax", "gitops"}))
	g.Expect(c.Options.LeaderElect).To(BeTrue())
	g.Expect(c.LogLevel).To(Equal("debug"))
}

// TestEveryFlagHasAVariable: the rule covers the whole FlagSet, so a flag added later is reachable from a
// Subscription without anyone remembering to wire it.
func TestEveryFlagHasAVariable(t *testing.T) {
	c := CommandLine{Options: DefaultOptions()}
	NewFlagSet("manager", &c).VisitAll(func(f *flag.Flag) {
		t.Run(f.Name, func(t *testing.T) {
			g := NewWithT(t)
			value := sampleValue(f)
			got, _, err := parse(nil, EnvName(f.Name)+"="+value)
			g.Expect(err).NotTo(HaveOccurred())
			fs := NewFlagSet("manager", &got)
			g.Expect(fs.Lookup(f.Name).Value.String()).To(Equal(value))
		})
	})
}

// sampleValue is a valid value of the flag's type that differs from its default.
func sampleValue(f *flag.Flag) string {
	if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool {
		if f.DefValue == "true" {
			return "false"
		}
		return "true"
	}
	switch {
	case strings.HasSuffix(f.DefValue, "s") && (f.DefValue == "0s" || strings.ContainsAny(f.DefValue[:1], "0123456789")):
		return "7m0s"
	case f.DefValue == "0" || isNumber(f.DefValue):
		return "7"
	case f.Name == "groups":
		return "gnmic,fleet"
	case f.Name == "monitoring-labels":
		return "release=kube-prometheus-stack,team=platform"
	default:
		return "sample-value"
	}
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	return strings.Trim(s, "0123456789.-") == ""
}

func TestExplicitFlagWinsOverTheVariable(t *testing.T) {
	g := NewWithT(t)
	c, _, err := parse([]string{"--prometheus-url=http://flag:9090", "--leader-elect=false"},
		"QUARTET_PROMETHEUS_URL=http://env:9090", "QUARTET_LEADER_ELECT=true")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Options.PrometheusURL).To(Equal("http://flag:9090"))
	g.Expect(c.Options.LeaderElect).To(BeFalse())
}

func TestCommandLineErrors(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"bad value names the variable and the flag", []string{"QUARTET_CANARY_ANALYSIS_INTERVAL=often"},
			[]string{"QUARTET_CANARY_ANALYSIS_INTERVAL", "--canary-analysis-interval", `"often"`}},
		{"bad bool", []string{"QUARTET_LEADER_ELECT=yes please"}, []string{"QUARTET_LEADER_ELECT", "--leader-elect"}},
		{"near-miss typo stops the manager and suggests the name", []string{"QUARTET_FLEET_CREDENTIAL_SECRET=a/b"},
			[]string{"QUARTET_FLEET_CREDENTIAL_SECRET", "QUARTET_FLEET_CREDENTIALS_SECRET"}},
		{"unknown variable", []string{"QUARTET_COLOUR=blue"}, []string{"unknown", "QUARTET_COLOUR"}},
		{"lower-case flag spelling is not the rule", []string{"QUARTET_prometheus-url=x"}, []string{"QUARTET_prometheus-url"}},
		{"alias with a bad value", []string{"AGENTRAX_REGISTRY_TTL=ninety"},
			[]string{"AGENTRAX_REGISTRY_TTL", "--registry-ttl"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := parse(nil, tc.environ...)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestReservedAndForeignVariablesAreIgnored(t *testing.T) {
	g := NewWithT(t)
	c, _, err := parse(nil, "QUARTET_DEV_GNMIC_COLLECTOR=false", "QUARTET_TEST_LOGS=1", "QUARTET_BENCH_AGENTS=10",
		"POD_NAMESPACE=ops", "PATH=/bin", "QUARTETX_FOO=1", "MALFORMED")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Options).To(Equal(DefaultOptions()))
}

// TestRegistryTTLAlias: AGENTRAX_REGISTRY_TTL, the variable the registry read before the rule, still works and
// loses to both the rule's name and the flag.
func TestRegistryTTLAlias(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		environ []string
		want    time.Duration
	}{
		{"alias alone", nil, []string{"AGENTRAX_REGISTRY_TTL=2m"}, 2 * time.Minute},
		{"the rule's name wins over the alias", nil,
			[]string{"AGENTRAX_REGISTRY_TTL=2m", "QUARTET_REGISTRY_TTL=3m"}, 3 * time.Minute},
		{"the flag wins over both", []string{"--registry-ttl=1h"},
			[]string{"AGENTRAX_REGISTRY_TTL=2m", "QUARTET_REGISTRY_TTL=3m"}, time.Hour},
		{"neither", nil, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, _, err := parse(tc.args, tc.environ...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Options.RegistryTTL).To(Equal(tc.want))
		})
	}
}

// TestHelpNamesEachFlagsVariable: `manager --help` tells an OLM user which variable sets each flag.
func TestHelpNamesEachFlagsVariable(t *testing.T) {
	g := NewWithT(t)
	_, out, err := parse([]string{"--help"})
	g.Expect(err).To(MatchError(flag.ErrHelp))
	c := CommandLine{Options: DefaultOptions()}
	NewFlagSet("manager", &c).VisitAll(func(f *flag.Flag) {
		g.Expect(out).To(MatchRegexp(`\[env %s(, alias [A-Z_]+)*\]`, EnvName(f.Name)), f.Name)
	})
	g.Expect(out).To(ContainSubstring("[env QUARTET_FLEET_CREDENTIALS_SECRET]"))
	g.Expect(out).To(ContainSubstring("[env QUARTET_REGISTRY_TTL, alias AGENTRAX_REGISTRY_TTL]"))
}

// TestGNMIcVariablesAreFlags: the gnmic collector knobs the Cluster controller read from the environment on its own
// are flags under the rule, with the same variable names as before.
func TestGNMIcVariablesAreFlags(t *testing.T) {
	g := NewWithT(t)
	c, _, err := parse(nil, "QUARTET_GNMIC_CLUSTER_DOMAIN=corp.example", "QUARTET_GNMIC_POLL_INTERVAL=1s",
		"QUARTET_GNMIC_RECONNECT_BACKOFF=100ms")
	g.Expect(err).NotTo(HaveOccurred())
	fs := NewFlagSet("manager", &c)
	for name, want := range map[string]string{"gnmic-cluster-domain": "corp.example", "gnmic-poll-interval": "1s",
		"gnmic-reconnect-backoff": "100ms"} {
		g.Expect(fs.Lookup(name)).NotTo(BeNil(), name)
		g.Expect(fs.Lookup(name).Value.String()).To(Equal(want), name)
	}
}
