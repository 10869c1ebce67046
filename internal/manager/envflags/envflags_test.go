package envflags

import (
	"flag"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestName(t *testing.T) {
	cases := []struct{ flag, want string }{
		{"fleet-credentials-secret", "QUARTET_FLEET_CREDENTIALS_SECRET"},
		{"prometheus-url", "QUARTET_PROMETHEUS_URL"},
		{"enable-http2", "QUARTET_ENABLE_HTTP2"},
		{"zap.log-level", "QUARTET_ZAP_LOG_LEVEL"},
		{"groups", "QUARTET_GROUPS"},
		{"Already_Upper", "QUARTET_ALREADY_UPPER"},
		{"", "QUARTET_"},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			NewWithT(t).Expect(Name(tc.flag)).To(Equal(tc.want))
		})
	}
}

// settings is a FlagSet with one flag of each kind the manager uses.
type settings struct {
	url      string
	enabled  bool
	interval time.Duration
	count    int
}

func newFlagSet(s *settings) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.StringVar(&s.url, "prometheus-url", "", "Prometheus.")
	fs.BoolVar(&s.enabled, "leader-elect", false, "Leader election.")
	fs.DurationVar(&s.interval, "registry-ttl", 0, "TTL.")
	fs.IntVar(&s.count, "kube-api-burst", 100, "Burst.")
	return fs
}

var rule = Rule{
	Aliases:  map[string][]string{"registry-ttl": {"OLD_TTL", "OLDER_TTL"}},
	Reserved: []string{"QUARTET_DEV_", "QUARTET_TEST_"},
}

func TestApply(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		environ []string
		want    settings
		wantErr []string
	}{
		{name: "nothing set", want: settings{count: 100}},
		{name: "variables set unset flags", environ: []string{"QUARTET_PROMETHEUS_URL=http://p:9090",
			"QUARTET_LEADER_ELECT=true", "QUARTET_REGISTRY_TTL=2m", "QUARTET_KUBE_API_BURST=7"},
			want: settings{url: "http://p:9090", enabled: true, interval: 2 * time.Minute, count: 7}},
		{name: "a value may contain '='", environ: []string{"QUARTET_PROMETHEUS_URL=http://p/?a=b"},
			want: settings{url: "http://p/?a=b", count: 100}},
		{name: "an empty value is a value", args: nil, environ: []string{"QUARTET_PROMETHEUS_URL="},
			want: settings{count: 100}},
		{name: "explicit flags win, even when given their default", args: []string{"--kube-api-burst=100", "--leader-elect=false"},
			environ: []string{"QUARTET_KUBE_API_BURST=7", "QUARTET_LEADER_ELECT=true"}, want: settings{count: 100}},
		{name: "first alias", environ: []string{"OLDER_TTL=3m", "OLD_TTL=2m"}, want: settings{interval: 2 * time.Minute, count: 100}},
		{name: "second alias", environ: []string{"OLDER_TTL=3m"}, want: settings{interval: 3 * time.Minute, count: 100}},
		{name: "the rule's name wins over aliases", environ: []string{"OLD_TTL=2m", "QUARTET_REGISTRY_TTL=1h"},
			want: settings{interval: time.Hour, count: 100}},
		{name: "a bad alias is not reached when the rule's name is set", environ: []string{"OLD_TTL=x", "QUARTET_REGISTRY_TTL=1h"},
			want: settings{interval: time.Hour, count: 100}},
		{name: "reserved and foreign variables are left alone", environ: []string{"QUARTET_DEV_X=1", "QUARTET_TEST_LOGS=1",
			"HOME=/root", "QUARTETS=1", "quartet_prometheus_url=x", "NOEQUALS"}, want: settings{count: 100}},
		{name: "bad duration", environ: []string{"QUARTET_REGISTRY_TTL=ninety"},
			wantErr: []string{`QUARTET_REGISTRY_TTL="ninety"`, "--registry-ttl"}},
		{name: "bad alias", environ: []string{"OLD_TTL=ninety"}, wantErr: []string{"OLD_TTL", "--registry-ttl"}},
		{name: "every bad value is reported", environ: []string{"QUARTET_KUBE_API_BURST=many", "QUARTET_LEADER_ELECT=perhaps"},
			wantErr: []string{"QUARTET_KUBE_API_BURST", "--kube-api-burst", "QUARTET_LEADER_ELECT", "--leader-elect"}},
		{name: "unknown variable", environ: []string{"QUARTET_COLOUR=blue"}, wantErr: []string{"unknown environment variable QUARTET_COLOUR"}},
		{name: "near-miss typo is named with a suggestion", environ: []string{"QUARTET_PROMETHEUS_ULR=x"},
			wantErr: []string{"QUARTET_PROMETHEUS_ULR", "did you mean QUARTET_PROMETHEUS_URL?"}},
		{name: "a Service's variable points at enableServiceLinks", environ: []string{"QUARTET_OPERATOR_WEBHOOK_SERVICE_SERVICE_HOST=10.0.0.1"},
			wantErr: []string{"QUARTET_OPERATOR_WEBHOOK_SERVICE_SERVICE_HOST", "enableServiceLinks: false"}},
		{name: "a Service's port variable", environ: []string{"QUARTET_OPERATOR_MCP_REGISTRY_PORT_443_TCP_ADDR=10.0.0.1"},
			wantErr: []string{"QUARTET_OPERATOR_MCP_REGISTRY_PORT_443_TCP_ADDR", "enableServiceLinks: false"}},
		{name: "a reserved prefix without its underscore is not reserved", environ: []string{"QUARTET_DEVX=1"},
			wantErr: []string{"QUARTET_DEVX"}},
		{name: "unknown variables stop the process even when the flag is given", args: []string{"--prometheus-url=x"},
			environ: []string{"QUARTET_PROMETHEUS_URI=x"}, wantErr: []string{"QUARTET_PROMETHEUS_URI"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var s settings
			fs := newFlagSet(&s)
			g.Expect(fs.Parse(tc.args)).To(Succeed())
			err := rule.Apply(fs, tc.environ)
			if len(tc.wantErr) > 0 {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tc.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s).To(Equal(tc.want))
		})
	}
}

func TestAnnotate(t *testing.T) {
	g := NewWithT(t)
	var s settings
	fs := newFlagSet(&s)
	rule.Annotate(fs)
	g.Expect(fs.Lookup("prometheus-url").Usage).To(Equal("Prometheus. [env QUARTET_PROMETHEUS_URL]"))
	g.Expect(fs.Lookup("registry-ttl").Usage).To(Equal("TTL. [env QUARTET_REGISTRY_TTL, alias OLD_TTL, alias OLDER_TTL]"))
}

func TestNearest(t *testing.T) {
	names := []string{"QUARTET_FLEET_CREDENTIALS_SECRET", "QUARTET_FLEET_API_URL", "QUARTET_PROMETHEUS_URL"}
	cases := []struct{ name, want string }{
		{"QUARTET_FLEET_CREDENTIAL_SECRET", "QUARTET_FLEET_CREDENTIALS_SECRET"},
		{"QUARTET_FLEET_API_URI", "QUARTET_FLEET_API_URL"},
		{"QUARTET_PROMETEUS_URL", "QUARTET_PROMETHEUS_URL"},
		{"QUARTET_SOMETHING_ELSE", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(nearest(tc.name, names)).To(Equal(tc.want))
		})
	}
}

// FuzzApply: for any flag name and environment, the rule's name of a flag is upper-case ASCII without '-' or
// '.', and Apply never panics; when it succeeds, every QUARTET_ variable was a flag's or reserved, and an
// explicitly given flag kept its value.
func FuzzApply(f *testing.F) {
	f.Add("fleet-credentials-secret", "QUARTET_FLEET_CREDENTIALS_SECRET=a/b\nQUARTET_TEST_X=1")
	f.Add("zap.level", "QUARTET_ZAP_LEVEL=\nQUARTET_LEADER_ELECT=maybe")
	f.Add("x", "QUARTET_=1\n=\nQUARTET_DEV_=\nOLD_TTL=1s")
	f.Fuzz(func(t *testing.T, flagName, environ string) {
		name := Name(flagName)
		if !strings.HasPrefix(name, Prefix) || strings.ContainsAny(name[len(Prefix):], "-.abcdefghijklmnopqrstuvwxyz") {
			t.Fatalf("Name(%q) = %q", flagName, name)
		}
		var s settings
		fs := newFlagSet(&s)
		if strings.ContainsAny(flagName, "=") || strings.HasPrefix(flagName, "-") || flagName == "" ||
			fs.Lookup(flagName) != nil {
			return
		}
		fs.String(flagName, "", "fuzzed")
		if err := fs.Parse([]string{"--prometheus-url=given"}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(environ, "\n")
		if err := rule.Apply(fs, lines); err != nil {
			return
		}
		if s.url != "given" {
			t.Fatalf("explicit --prometheus-url lost: %q", s.url)
		}
		for _, kv := range lines {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !strings.HasPrefix(k, Prefix) || strings.HasPrefix(k, "QUARTET_DEV_") || strings.HasPrefix(k, "QUARTET_TEST_") {
				continue
			}
			known := false
			fs.VisitAll(func(f *flag.Flag) { known = known || Name(f.Name) == k })
			if !known {
				t.Fatalf("Apply accepted unknown %s", k)
			}
		}
	})
}
