package rollout

import (
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
)

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{5 * time.Minute, "5m"},
		{90 * time.Minute, "1h30m"},
		{45 * time.Second, "45s"},
		{time.Hour, "1h"},
		{time.Minute, "1m"},
		{61 * time.Second, "1m1s"},
		{36 * time.Hour, "36h"},
		{time.Hour + time.Second, "1h1s"},
		{1500 * time.Millisecond, "1s500ms"},
		{250 * time.Millisecond, "250ms"},
		// Sub-millisecond remainders round up, never down to 0s.
		{time.Nanosecond, "1ms"},
		{time.Second + time.Microsecond, "1s1ms"},
		{999_999 * time.Microsecond, "1s"},
		{0, "0s"},
		{-time.Minute, "0s"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			NewWithT(t).Expect(FormatDuration(tc.in)).To(Equal(tc.want))
		})
	}
}

// FuzzFormatDuration checks the rendering against Prometheus's own duration parser: it parses, it is never shorter
// than the input, it is less than a millisecond longer, and it never carries a zero unit like "0s" after another.
func FuzzFormatDuration(f *testing.F) {
	for _, s := range []int64{0, 1, int64(time.Millisecond), int64(time.Minute), int64(90 * time.Minute),
		int64(time.Hour + 999*time.Microsecond), 1<<63 - 1} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		s := FormatDuration(d)
		if d <= 0 {
			if s != "0s" {
				t.Fatalf("FormatDuration(%d) = %q, want 0s", n, s)
			}
			return
		}
		if d > 1<<63-1-time.Millisecond {
			// Rounded up, this exceeds the int64-nanosecond range Prometheus parses into; no window is this long.
			return
		}
		parsed, err := model.ParseDuration(s)
		if err != nil {
			t.Fatalf("FormatDuration(%d) = %q does not parse: %v", n, s, err)
		}
		if got := time.Duration(parsed); got < d || got-d >= time.Millisecond {
			t.Fatalf("FormatDuration(%d) = %q = %v, want within [d, d+1ms)", n, s, got)
		}
		for _, bad := range []string{"0h", "0m", "0s", "0ms"} {
			if strings.HasPrefix(s, bad) || strings.Contains(s, "h"+bad) || strings.Contains(s, "m"+bad) ||
				strings.Contains(s, "s"+bad) {
				t.Fatalf("FormatDuration(%d) = %q carries a zero unit", n, s)
			}
		}
	})
}

func TestBuildGolden(t *testing.T) {
	target := Target{Namespace: "team-a", Name: "support-bot", Variant: "canary"}
	for _, tc := range []struct {
		name    string
		metrics Metrics
		window  time.Duration
		want    Queries
	}{{
		name:   "defaults",
		window: 5 * time.Minute,
		want: Queries{
			Requests: `sum(increase(http_requests_total{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary"}[5m])) or vector(0)`,
			ErrorRate: `(sum(increase(http_requests_total{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary",code=~"5.."}[5m])) or vector(0))` +
				` / clamp_min(sum(increase(http_requests_total{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary"}[5m])) or vector(0), 1)`,
			P99: `histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary"}[5m])))`,
		},
	}, {
		name: "custom names",
		metrics: Metrics{Requests: "agent_requests_total", DurationBucket: "agent_latency_seconds_bucket",
			CodeLabel: "status", VariantLabel: "variant", AppLabel: "app", NamespaceLabel: "kubernetes_namespace"},
		window: 90 * time.Minute,
		want: Queries{
			Requests: `sum(increase(agent_requests_total{kubernetes_namespace="team-a",app="support-bot",variant="canary"}[1h30m])) or vector(0)`,
			ErrorRate: `(sum(increase(agent_requests_total{kubernetes_namespace="team-a",app="support-bot",variant="canary",status=~"5.."}[1h30m])) or vector(0))` +
				` / clamp_min(sum(increase(agent_requests_total{kubernetes_namespace="team-a",app="support-bot",variant="canary"}[1h30m])) or vector(0), 1)`,
			P99: `histogram_quantile(0.99, sum by (le) (rate(agent_latency_seconds_bucket{kubernetes_namespace="team-a",app="support-bot",variant="canary"}[1h30m])))`,
		},
	}, {
		name:    "partly set names keep the other defaults",
		metrics: Metrics{CodeLabel: "status_code"},
		window:  45 * time.Second,
		want: Queries{
			Requests: `sum(increase(http_requests_total{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary"}[45s])) or vector(0)`,
			ErrorRate: `(sum(increase(http_requests_total{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary",status_code=~"5.."}[45s])) or vector(0))` +
				` / clamp_min(sum(increase(http_requests_total{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary"}[45s])) or vector(0), 1)`,
			P99: `histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="team-a",app_kubernetes_io_name="support-bot",agentrax_io_variant="canary"}[45s])))`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.metrics.Validate()).To(Succeed())
			g.Expect(tc.metrics.Build(target, tc.window)).To(Equal(tc.want))
		})
	}
}

func TestMetricsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics Metrics
		wantErr string
	}{
		{"defaults", Metrics{}, ""},
		{"colon in metric name", Metrics{Requests: "job:http_requests:rate5m"}, ""},
		{"metric with brace", Metrics{Requests: `x{a="b"}`}, "not a PromQL identifier"},
		{"metric starting with digit", Metrics{DurationBucket: "9lives"}, "not a PromQL identifier"},
		{"label with dot", Metrics{VariantLabel: "agentrax.io/variant"}, "not a PromQL label name"},
		{"label with colon", Metrics{AppLabel: "a:b"}, "not a PromQL label name"},
		{"reserved label", Metrics{NamespaceLabel: "__name__"}, "not a PromQL label name"},
		{"label used twice", Metrics{AppLabel: "namespace"}, "used for two roles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.metrics.Validate()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// scanString reads a PromQL double-quoted literal starting at s[0] the way the PromQL lexer does (a backslash
// escapes the next character; an unescaped quote or a raw newline ends or breaks it) and returns its length.
func scanString(s string) (int, bool) {
	if s == "" || s[0] != '"' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '\n':
			return 0, false
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// FuzzLabelValueEscaping builds the queries with hostile namespace/name values and checks that each value stays
// one literal: the selector after it is exactly what the builder meant to write, and it unquotes to the input.
func FuzzLabelValueEscaping(f *testing.F) {
	for _, s := range []string{"team-a", `a"b`, `a\`, "a\nb", `"}[5m])) or vector(1) #`, "\x00\xff", `\"`, "é\u2028"} {
		f.Add(s, "bot")
		f.Add("ns", s)
	}
	f.Fuzz(func(t *testing.T, ns, name string) {
		q := Metrics{}.Build(Target{Namespace: ns, Name: name, Variant: "canary"}, time.Minute).Requests
		rest, ok := strings.CutPrefix(q, "sum(increase(http_requests_total{namespace=")
		if !ok {
			t.Fatalf("unexpected prefix: %q", q)
		}
		for _, want := range []struct {
			value, next string
		}{{ns, ",app_kubernetes_io_name="}, {name, ",agentrax_io_variant="}, {"canary", "}[1m])) or vector(0)"}} {
			n, ok := scanString(rest)
			if !ok {
				t.Fatalf("literal for %q does not lex in %q", want.value, q)
			}
			got, err := strconv.Unquote(rest[:n])
			if err != nil || got != want.value {
				t.Fatalf("literal %s unquotes to %q (%v), want %q", rest[:n], got, err, want.value)
			}
			if rest, ok = strings.CutPrefix(rest[n:], want.next); !ok {
				t.Fatalf("value %q broke out of its literal: %q", want.value, q)
			}
		}
		if rest != "" {
			t.Fatalf("trailing text %q in %q", rest, q)
		}
	})
}
