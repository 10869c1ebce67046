package rollout

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Metrics names the series and labels the canary analysis queries. The zero value of a field means its default,
// so a partly filled Metrics (from flags or a spec) still builds complete queries.
type Metrics struct {
	// Requests is the request counter; default http_requests_total.
	Requests string
	// DurationBucket is the latency histogram's _bucket series, in seconds; default
	// http_request_duration_seconds_bucket.
	DurationBucket string
	// CodeLabel carries the HTTP status code on Requests; default code.
	CodeLabel string
	// VariantLabel carries agentrax.io/variant as Prometheus stores it (dots become underscores); default
	// agentrax_io_variant.
	VariantLabel string
	// AppLabel carries app.kubernetes.io/name; default app_kubernetes_io_name.
	AppLabel string
	// NamespaceLabel carries the pod's namespace; default namespace.
	NamespaceLabel string
}

// Default metric and label names.
const (
	DefaultRequestsMetric = "http_requests_total"
	DefaultDurationBucket = "http_request_duration_seconds_bucket"
	DefaultCodeLabel      = "code"
	DefaultVariantLabel   = "agentrax_io_variant"
	DefaultAppLabel       = "app_kubernetes_io_name"
	DefaultNamespaceLabel = "namespace"
)

// withDefaults fills empty names with the defaults.
func (m Metrics) withDefaults() Metrics {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&m.Requests, DefaultRequestsMetric)
	def(&m.DurationBucket, DefaultDurationBucket)
	def(&m.CodeLabel, DefaultCodeLabel)
	def(&m.VariantLabel, DefaultVariantLabel)
	def(&m.AppLabel, DefaultAppLabel)
	def(&m.NamespaceLabel, DefaultNamespaceLabel)
	return m
}

// Names are interpolated into queries unquoted, so they must be plain PromQL identifiers: Prometheus 2.x (what
// Debian ships) has no quoted-name syntax, and a name with spaces or braces would change the query's meaning.
var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Validate rejects names that are not PromQL identifiers, and label names that collide (a selector naming the
// same label twice with different values matches nothing, which would read as "no traffic").
func (m Metrics) Validate() error {
	m = m.withDefaults()
	for _, n := range []string{m.Requests, m.DurationBucket} {
		if !metricNameRE.MatchString(n) {
			return fmt.Errorf("metric name %q is not a PromQL identifier", n)
		}
	}
	seen := map[string]bool{}
	for _, n := range []string{m.CodeLabel, m.VariantLabel, m.AppLabel, m.NamespaceLabel} {
		if !labelNameRE.MatchString(n) || strings.HasPrefix(n, "__") {
			return fmt.Errorf("label name %q is not a PromQL label name", n)
		}
		if seen[n] {
			return fmt.Errorf("label name %q is used for two roles", n)
		}
		seen[n] = true
	}
	return nil
}

// Target selects one variant of one agent.
type Target struct {
	Namespace string
	Name      string
	// Variant is "canary" or "stable".
	Variant string
}

// Queries holds the three analysis queries for one target and window.
type Queries struct {
	// Requests is the number of requests in the window (0 when there were none).
	Requests string
	// ErrorRate is the share of 5xx responses in the window, 0..1 (0 when there were no requests).
	ErrorRate string
	// P99 is the 99th-percentile latency in seconds; NaN or empty when there were no requests.
	P99 string
}

// Build renders the analysis queries. Callers validate m first; Build does not fail so it can sit in hot paths.
func (m Metrics) Build(t Target, window time.Duration) Queries {
	m = m.withDefaults()
	sel := m.selector(t)
	w := FormatDuration(window)
	total := fmt.Sprintf("sum(increase(%s{%s}[%s]))", m.Requests, sel, w)
	errors := fmt.Sprintf("sum(increase(%s{%s,%s=~\"5..\"}[%s]))", m.Requests, sel, m.CodeLabel, w)
	return Queries{
		// "or vector(0)": no series at all (no traffic yet) is zero requests, not a missing answer.
		Requests: total + " or vector(0)",
		// Safe division: the numerator falls back to 0 when no 5xx series exist, the denominator to at least 1 so
		// an idle window yields 0 rather than NaN or +Inf. The sample gate (minRequestSample) keeps that 0 from
		// counting as a pass.
		ErrorRate: fmt.Sprintf("(%s or vector(0)) / clamp_min(%s or vector(0), 1)", errors, total),
		// No fallback here: an idle window has no latency, and NaN/empty must stay distinguishable from 0 s.
		P99: fmt.Sprintf("histogram_quantile(0.99, sum by (le) (rate(%s{%s}[%s])))", m.DurationBucket, sel, w),
	}
}

// selector is the label matcher list shared by every query, without braces.
func (m Metrics) selector(t Target) string {
	return fmt.Sprintf("%s=%s,%s=%s,%s=%s",
		m.NamespaceLabel, QuoteLabelValue(t.Namespace),
		m.AppLabel, QuoteLabelValue(t.Name),
		m.VariantLabel, QuoteLabelValue(t.Variant))
}

// QuoteLabelValue renders s as a PromQL double-quoted string. PromQL string literals use Go's escape rules, so Go's
// quoting is exact: quotes, backslashes, newlines and any non-printable byte are escaped and the value cannot end
// the literal early and inject matchers.
func QuoteLabelValue(s string) string {
	return strconv.Quote(s)
}

// FormatDuration renders d the way Prometheus writes durations: largest unit first, zero units left out
// (5m, 1h30m, 45s, 1h — never 1m0s). Prometheus's smallest unit is the millisecond, so a sub-millisecond remainder
// rounds UP to the next millisecond: a window never shrinks below what was asked, and a positive duration never
// renders as 0s. Zero and negative durations render as "0s" (callers never use them as a range).
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	var b strings.Builder
	for _, u := range []struct {
		ms   int64
		unit string
	}{{3600_000, "h"}, {60_000, "m"}, {1000, "s"}, {1, "ms"}} {
		if n := ms / u.ms; n > 0 {
			b.WriteString(strconv.FormatInt(n, 10))
			b.WriteString(u.unit)
			ms -= n * u.ms
		}
	}
	return b.String()
}
