package promreal

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
)

// exported is what one process serves at /metrics: every metric family of a scrape, by name, with its type.
type exported map[string]dto.MetricType

// has: name is a family of the scrape, or a histogram's _bucket/_sum/_count series or a summary's _sum/_count
// series of one.
func (e exported) has(name string) bool {
	if _, ok := e[name]; ok {
		return true
	}
	for suffix, types := range map[string][]dto.MetricType{
		"_bucket": {dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM},
		"_sum":    {dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY},
		"_count":  {dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY},
	} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if typ, ok := e[base]; ok && slices.Contains(types, typ) {
				return true
			}
		}
	}
	return false
}

// missing returns the metric names expr selects that the scrape does not serve.
func (e exported) missing(expr string) []string {
	var out []string
	for _, n := range metricNames(expr) {
		if !e.has(n) {
			out = append(out, n)
		}
	}
	return out
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

// TestScrapeChecker: the check reads families from the text a /metrics endpoint serves; a name no family serves,
// a misspelled one, a family declared without any series, and a _bucket of a counter are reported missing.
func TestScrapeChecker(t *testing.T) {
	g := NewWithT(t)
	served, err := parseExposition(strings.NewReader(`# HELP fleet_api_requests_total Requests.
# TYPE fleet_api_requests_total counter
fleet_api_requests_total{operation="ListPipelines"} 3
# HELP fleet_api_errors_total Errors.
# TYPE fleet_api_errors_total counter
# HELP a_seconds Latency.
# TYPE a_seconds histogram
a_seconds_bucket{le="1"} 1
a_seconds_bucket{le="+Inf"} 1
a_seconds_sum 0.5
a_seconds_count 1
# HELP s_seconds A summary.
# TYPE s_seconds summary
s_seconds_sum 1
s_seconds_count 2
# HELP g A gauge.
# TYPE g gauge
g 0
`))
	g.Expect(err).NotTo(HaveOccurred())
	for expr, missing := range map[string][]string{
		`rate(fleet_api_requests_total[5m])`: nil,
		`sum by (operation) (rate(fleet_api_errors_total[10m])) / sum by (operation) (rate(fleet_api_requests_total[10m]))`: {"fleet_api_errors_total"},
		`rate(fleet_api_request_total[5m]) > 0`:                             {"fleet_api_request_total"},
		`histogram_quantile(0.9, sum by (le) (rate(a_seconds_bucket[5m])))`: nil,
		`a_seconds_sum / a_seconds_count + s_seconds_sum / s_seconds_count`: nil,
		`s_seconds_bucket + g_bucket + g_count + g`:                         {"g_bucket", "g_count", "s_seconds_bucket"},
		`fleet_api_requests_total_count`:                                    {"fleet_api_requests_total_count"},
	} {
		g.Expect(served.missing(expr)).To(Equal(missing), expr)
	}
	g.Expect(served.names()).To(Equal("a_seconds fleet_api_requests_total g s_seconds"))
}
