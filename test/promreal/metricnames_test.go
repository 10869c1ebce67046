package promreal

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// Every package that registers metrics: the manager's (controllers, clients, webhooks) and the katastroma
	// binary's built into the same image (every gitops stage through the runner, and pharos), each served from
	// controller-runtime's registry.
	_ "github.com/quartet-dev/quartet-operator/controllers/agentrax"
	_ "github.com/quartet-dev/quartet-operator/controllers/fleet"
	_ "github.com/quartet-dev/quartet-operator/controllers/gitops"
	_ "github.com/quartet-dev/quartet-operator/controllers/gnmic"
	_ "github.com/quartet-dev/quartet-operator/internal/gitops/pharos"
	_ "github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	_ "github.com/quartet-dev/quartet-operator/internal/manager"
)

// exportedMetricNames lists every metric family registered with controller-runtime's registry, which is what the
// manager's /metrics (and katastroma's --metrics-bind-address) serves. Describe is used rather than Gather because a
// vector with no series yet is absent from a scrape but still exported once something happens.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	descs := make(chan *prometheus.Desc)
	go func() {
		ctrlmetrics.Registry.(prometheus.Collector).Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	NewWithT(t).Expect(names).To(HaveKey("controller_runtime_reconcile_total"), "controller-runtime's registry")
	return names
}

// isExported: name is a family, or a histogram's or summary's _bucket/_sum/_count series of one.
func isExported(exported map[string]bool, name string) bool {
	if exported[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
			return true
		}
	}
	return false
}

// Words of PromQL that are not metric names: binary and set operators, modifiers, and aggregations (which may
// be followed by `by (...)` rather than by a parenthesis).
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
}

// Keywords followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// metricNames returns the metric names a PromQL expression selects, sorted and unique. It is a scanner, not a
// parser (the real Prometheus parses the expressions in TestRulesLoadIntoPrometheus): it skips string literals,
// label matchers, ranges, numbers and durations, function calls, keywords and the label lists of by/on/...
func metricNames(expr string) []string {
	found := map[string]bool{}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipTo(expr, i, '}')
		case c == '[':
			i = skipTo(expr, i, ']')
		case c == '#': // a comment runs to the end of the line
			i = skipTo(expr, i, '\n')
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdentChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdentChar(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := i
			for next < len(expr) && (expr[next] == ' ' || expr[next] == '\t' || expr[next] == '\n') {
				next++
			}
			switch {
			case labelListKeywords[strings.ToLower(word)]:
				if next < len(expr) && expr[next] == '(' {
					i = skipTo(expr, next, ')')
				}
			case promqlKeywords[strings.ToLower(word)]:
			case next < len(expr) && expr[next] == '(':
				// a function call
			default:
				found[word] = true
			}
		default:
			i++
		}
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// skipString returns the index after the literal starting at i (backslash escapes inside quotes).
func skipString(s string, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		if s[i] == '\\' && quote != '`' {
			i++
			continue
		}
		if s[i] == quote {
			return i + 1
		}
	}
	return len(s)
}

// skipTo returns the index after the first end at or after i, skipping string literals on the way.
func skipTo(s string, i int, end byte) int {
	for i++; i < len(s); {
		switch s[i] {
		case '"', '\'', '`':
			i = skipString(s, i)
		case end:
			return i + 1
		default:
			i++
		}
	}
	return len(s)
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`up`:                                 {"up"},
		`rate(fleet_api_requests_total[5m])`: {"fleet_api_requests_total"},
		`sum by (kind, reason) (rate(fleet_resource_synced_total{reason=~"SyncFailed|x}"}[10m])) > 0`: {"fleet_resource_synced_total"},
		`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket[5m]))) > 2`:                      {"a_seconds_bucket"},
		`time() - b_timestamp_seconds > on (namespace, name) 3 * c_interval_seconds`:                  {"b_timestamp_seconds", "c_interval_seconds"},
		`sum(x) / ignoring(code) group_left (le) sum without (pod) (y offset 1h)`:                     {"x", "y"},
		`a unless on(ns) b and bool c or d`:                                                           {"a", "b", "c", "d"},
		`count(x{a="b"}) + 1e3 + 0x1F + 2.5 + Inf`:                                                    {"x"},
		`{__name__="only_a_matcher"}`:                                                                 {},
		`max_over_time(x[1h:5m]) # trailing comment naming nothing_here`:                              {"x"},
		`label_replace(x, "dst", "$1", "src", "(.*)")`:                                                {"x"},
		`sum by(le)(rate(h_bucket{job='it\'s'}[$__rate_interval]))`:                                   {"h_bucket"},
		`topk(5, sum by (namespace) (katastroma_pharos_events{state="failed"}))`:                      {"katastroma_pharos_events"},
	} {
		NewWithT(t).Expect(metricNames(expr)).To(Equal(want), expr)
	}
}

// FuzzMetricNames: any input terminates and yields only well-formed metric names.
func FuzzMetricNames(f *testing.F) {
	for _, seed := range []string{`sum by (a) (rate(x{b="c"}[5m]))`, `"unterminated`, `{`, `[`, `by (`, `a # b`, `1e`} {
		f.Add(seed)
	}
	ident := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	f.Fuzz(func(t *testing.T, expr string) {
		for _, n := range metricNames(expr) {
			if !ident.MatchString(n) {
				panic(fmt.Sprintf("%q yielded the name %q", expr, n))
			}
		}
	})
}
