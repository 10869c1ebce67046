package v1alpha1

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseMatcher(t *testing.T) {
	for in, tc := range map[string]struct {
		name, op, value string
		wantErr         string
	}{
		`env="prod"`:           {"env", "=", "prod", ""},
		`env = prod`:           {"env", "=", "prod", ""},
		`env!="prod"`:          {"env", "!=", "prod", ""},
		`team=~"a|b"`:          {"team", "=~", "a|b", ""},
		`team!~"a.*"`:          {"team", "!~", "a.*", ""},
		`collector.id="x"`:     {"collector.id", "=", "x", ""},
		`_x1.y="q\"uote"`:      {"_x1.y", "=", `q"uote`, ""},
		`env==prod`:            {wantErr: `"==" is not supported`},
		`1env="x"`:             {wantErr: "must start with a label name"},
		`env`:                  {wantErr: "must be followed by"},
		`env=`:                 {wantErr: "missing value"},
		`env="unterminated`:    {wantErr: "not a valid double-quoted string"},
		`env=~"("`:             {wantErr: "not a valid regular expression"},
		`env=a"b`:              {wantErr: "must not contain a double quote"},
		`env~"x"`:              {wantErr: "must be followed by"},
		``:                     {wantErr: "must start with a label name"},
		`env-name="x"`:         {wantErr: "must be followed by"},
		`env="prod" extra="x"`: {"env", "=", `"prod" extra="x"`, "not a valid double-quoted string"},
	} {
		t.Run(in, func(t *testing.T) {
			g := NewWithT(t)
			m, err := ParseMatcher(in)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([]string{m.Name, string(m.Type), m.Value}).To(Equal([]string{tc.name, tc.op, tc.value}))
		})
	}
}

func TestMatcherMatchesLikeAlertmanager(t *testing.T) {
	attrs := map[string]string{"env": "prod", "team": "platform"}
	for in, want := range map[string]bool{
		`env="prod"`:         true,
		`env!="prod"`:        false,
		`env=~"pro"`:         false, // fully anchored
		`env=~"pro.*"`:       true,
		`env!~"dev|test"`:    true,
		`team=~"plat"`:       false,
		`missing=""`:         true,
		`missing!=""`:        false,
		`missing=~".*"`:      true,
		`env=~"prod|dev"`:    true,
		`env=~"^prod$"`:      true,
		`team=~"a|platform"`: true,
	} {
		m, err := ParseMatcher(in)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), in)
		NewWithT(t).Expect(m.Matches(attrs)).To(Equal(want), in)
	}
}

func FuzzParseMatcher(f *testing.F) {
	for _, s := range []string{`env="prod"`, `a=~"b|c"`, `x!~y`, `a==b`, `a="\u00e9"`, `a=~"(("`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMatcher(s)
		if err != nil {
			return
		}
		// The canonical form parses to the same matcher.
		again, err := ParseMatcher(m.String())
		if err != nil {
			t.Fatalf("%q parsed but its canonical form %q does not: %v", s, m.String(), err)
		}
		if again.Name != m.Name || again.Type != m.Type || again.Value != m.Value {
			t.Fatalf("%q: canonical form %q parses differently", s, m.String())
		}
		_ = m.Matches(map[string]string{m.Name: m.Value})
	})
}

func TestCheckContents(t *testing.T) {
	for name, tc := range map[string]struct {
		configType ConfigType
		contents   string
		want       string
	}{
		"alloy ok":             {ConfigTypeAlloy, "prometheus.scrape \"x\" {}", ""},
		"alloy with otel yaml": {ConfigTypeAlloy, "receivers:\n  otlp: {}\n", "set configType to OpenTelemetryCollector"},
		"alloy after comments": {ConfigTypeAlloy, "# hi\n\n// x\nservice:\n", "OpenTelemetry Collector YAML"},
		"alloy exporters":      {ConfigTypeAlloy, "exporters: {}", "OpenTelemetry"},
		"blank":                {ConfigTypeAlloy, "  \n", "must not be empty"},
		"otel ok":              {ConfigTypeOTel, "receivers: {}\nservice:\n  pipelines: {}\n", ""},
		"otel not yaml":        {ConfigTypeOTel, "a: [", "must be YAML"},
		"otel no service":      {ConfigTypeOTel, "receivers: {}\n", "top-level service key"},
		"otel alloy syntax":    {ConfigTypeOTel, "logging {\n level = \"debug\"\n}\n", "OpenTelemetryCollector"},
		"otel scalar":          {ConfigTypeOTel, "just text", "must be YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			got := CheckContents(tc.configType, tc.contents)
			if tc.want == "" {
				NewWithT(t).Expect(got).To(BeEmpty())
			} else {
				NewWithT(t).Expect(got).To(ContainSubstring(tc.want))
			}
		})
	}
}

func FuzzCheckContents(f *testing.F) {
	f.Add(true, "service:\n  pipelines: {}\n")
	f.Add(false, "receivers:\n")
	f.Add(false, "logging {}")
	f.Add(true, "- a\n- b")
	f.Fuzz(func(t *testing.T, otel bool, contents string) {
		ct := ConfigTypeAlloy
		if otel {
			ct = ConfigTypeOTel
		}
		reason := CheckContents(ct, contents)
		if strings.TrimSpace(contents) == "" && reason == "" {
			t.Fatal("empty contents accepted")
		}
		if ct == ConfigTypeAlloy && reason == "" {
			for _, k := range otelTopLevelKeys {
				if strings.HasPrefix(firstSignificantLine(contents), k) {
					t.Fatalf("Alloy contents starting with %q accepted", k)
				}
			}
		}
	})
}

func pipeline(mutate func(*Pipeline)) *Pipeline {
	p := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "logs", Namespace: "ns"},
		Spec: PipelineSpec{Contents: "logging {}", ConfigType: ConfigTypeAlloy}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestValidatePipeline(t *testing.T) {
	for name, tc := range map[string]struct {
		p           *Pipeline
		wantField   string
		wantText    string
		wantWarning string
	}{
		"ok": {p: pipeline(nil)},
		"name with space": {p: pipeline(func(p *Pipeline) { p.Spec.Name = "a b" }),
			wantField: "spec.name", wantText: "whitespace"},
		"name with control": {p: pipeline(func(p *Pipeline) { p.Spec.Name = "a\x01" }),
			wantField: "spec.name", wantText: "control"},
		"empty contents": {p: pipeline(func(p *Pipeline) { p.Spec.Contents = "" }),
			wantField: "spec.contents", wantText: "Required"},
		"otel in alloy": {p: pipeline(func(p *Pipeline) { p.Spec.Contents = "service:\n" }),
			wantField: "spec.contents", wantText: "OpenTelemetry"},
		"bad matcher": {p: pipeline(func(p *Pipeline) { p.Spec.Matchers = []string{`env="a"`, "env==b"} }),
			wantField: "spec.matchers[1]", wantText: `"==" is not supported`},
		"too long matcher": {p: pipeline(func(p *Pipeline) { p.Spec.Matchers = []string{"a=" + strings.Repeat("x", 200)} }),
			wantField: "spec.matchers[0]", wantText: "more than 200"},
		"git without namespace": {p: pipeline(func(p *Pipeline) { p.Spec.Source = &PipelineSource{Type: SourceTypeGit} }),
			wantField: "spec.source.namespace", wantText: "required when source.type is Git"},
		"unspecified with namespace": {p: pipeline(func(p *Pipeline) {
			p.Spec.Source = &PipelineSource{Type: SourceTypeUnspecified, Namespace: "x"}
		}), wantField: "spec.source.namespace", wantText: "must be empty"},
		"grafana adopt": {p: pipeline(func(p *Pipeline) {
			p.Spec.Source = &PipelineSource{Type: SourceTypeGrafana, Namespace: "g"}
			p.Annotations = map[string]string{AnnotationImportMode: ImportModeAdopt}
		}), wantField: "spec.source.type", wantText: "cannot be adopted"},
		"kubernetes warns": {p: pipeline(func(p *Pipeline) { p.Spec.Source = &PipelineSource{Type: SourceTypeKubernetes} }),
			wantWarning: "deprecated"},
		"bad import mode": {p: pipeline(func(p *Pipeline) { p.Annotations = map[string]string{AnnotationImportMode: "own"} }),
			wantField: "metadata.annotations[fleetmanagement.grafana.com/import-mode]", wantText: "Unsupported value"},
		"bad name scope": {p: pipeline(func(p *Pipeline) { p.Annotations = map[string]string{AnnotationNameScope: "cluster"} }),
			wantField: "metadata.annotations[fleetmanagement.grafana.com/name-scope]", wantText: "Unsupported value"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs, warnings := ValidatePipeline(tc.p)
			if tc.wantWarning != "" {
				g.Expect(strings.Join(warnings, ";")).To(ContainSubstring(tc.wantWarning))
			}
			if tc.wantField == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate().Error()).To(And(ContainSubstring(tc.wantField), ContainSubstring(tc.wantText)))
		})
	}
}

func TestValidateCollector(t *testing.T) {
	many := map[string]string{}
	for i := range 101 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, tc := range map[string]struct {
		c, old    *Collector
		wantField string
		wantText  string
	}{
		"ok":           {c: &Collector{Spec: CollectorSpec{ID: "a", RemoteAttributes: map[string]string{"env": "prod"}}}},
		"blank id":     {c: &Collector{Spec: CollectorSpec{ID: " "}}, wantField: "spec.id", wantText: "Required"},
		"id changed":   {c: &Collector{Spec: CollectorSpec{ID: "b"}}, old: &Collector{Spec: CollectorSpec{ID: "a"}}, wantField: "spec.id", wantText: "immutable"},
		"empty key":    {c: &Collector{Spec: CollectorSpec{ID: "a", RemoteAttributes: map[string]string{"": "x"}}}, wantField: "spec.remoteAttributes", wantText: "must not be empty"},
		"reserved key": {c: &Collector{Spec: CollectorSpec{ID: "a", RemoteAttributes: map[string]string{"collector.os": "x"}}}, wantField: "spec.remoteAttributes[collector.os]", wantText: "reserved"},
		"long value":   {c: &Collector{Spec: CollectorSpec{ID: "a", RemoteAttributes: map[string]string{"k": strings.Repeat("v", 1025)}}}, wantField: "spec.remoteAttributes[k]", wantText: "more than 1024"},
		"too many":     {c: &Collector{Spec: CollectorSpec{ID: "a", RemoteAttributes: many}}, wantField: "spec.remoteAttributes", wantText: "must have at most 100"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidateCollector(tc.c, tc.old)
			if tc.wantField == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate().Error()).To(And(ContainSubstring(tc.wantField), ContainSubstring(tc.wantText)))
		})
	}
}

func FuzzValidateCollectorAttributes(f *testing.F) {
	f.Add("env", "prod")
	f.Add("collector.os", "x")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, key, value string) {
		errs := ValidateCollector(&Collector{Spec: CollectorSpec{ID: "a", RemoteAttributes: map[string]string{key: value}}}, nil)
		bad := key == "" || strings.HasPrefix(key, ReservedAttributePrefix) || len(value) > MaxAttributeValueLength
		if bad != (len(errs) > 0) {
			t.Fatalf("key %q value len %d: errors %v", key, len(value), errs)
		}
	})
}

func FuzzValidatePipeline(f *testing.F) {
	f.Add("logs", "logging {}", `env="prod"`, "Alloy", "Git", "repo", "adopt")
	f.Add("", "service:\n  pipelines: {}\n", `a=~"(b"`, "OpenTelemetryCollector", "Grafana", "", "read-only")
	f.Add("a b", "", "x==y", "XML", "Kubernetes", "ns", "")
	f.Fuzz(func(t *testing.T, name, contents, matcher, configType, sourceType, sourceNS, importMode string) {
		p := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{AnnotationImportMode: importMode}},
			Spec: PipelineSpec{Name: name, Contents: contents, Matchers: []string{matcher}, ConfigType: ConfigType(configType),
				Source: &PipelineSource{Type: SourceType(sourceType), Namespace: sourceNS}}}
		errs, _ := ValidatePipeline(p)
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "metadata.") {
				t.Fatalf("error does not name a field: %v", e)
			}
		}
		if _, err := ParseMatcher(matcher); err != nil && len(errs) == 0 {
			t.Fatalf("bad matcher %q accepted", matcher)
		}
	})
}
