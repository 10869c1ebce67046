package renderer

import (
	"testing"

	. "github.com/onsi/gomega"
)

// umbrella is a chart with three unpacked subcharts under charts/: postgresql behind a condition, redis behind a
// tag, and lib, which exports defaults the parent imports.
func umbrella() map[string][]byte {
	sub := func(name string) string {
		return "apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n"
	}
	subCM := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + name + "\n"
	}
	return map[string][]byte{
		"Chart.yaml": []byte(`apiVersion: v2
name: app
version: 0.1.0
dependencies:
- {name: postgresql, version: "1.x", condition: postgresql.enabled}
- {name: redis, version: "1.x", tags: [cache]}
- {name: lib, version: "1.x", import-values: [defaults]}
`),
		"values.yaml": []byte("postgresql:\n  enabled: false\ntags:\n  cache: false\n"),
		"templates/cm.yaml": []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-app
data:
  color: {{ .Values.color | default "none" | quote }}
`),
		"charts/postgresql/Chart.yaml":          []byte(sub("postgresql")),
		"charts/postgresql/templates/cm.yaml":   []byte(subCM("postgresql")),
		"charts/redis/Chart.yaml":               []byte(sub("redis")),
		"charts/redis/templates/cm.yaml":        []byte(subCM("redis")),
		"charts/lib/Chart.yaml":                 []byte(sub("lib")),
		"charts/lib/values.yaml":                []byte("exports:\n  defaults:\n    color: blue\n"),
		"charts/lib/templates/cm.yaml":          []byte(subCM("lib")),
		"charts/postgresql/templates/NOTES.txt": []byte("hello"),
	}
}

// TestHelmDependenciesAsHelmInstalls: conditions, tags and import-values are processed as Helm's install action
// processes them; overrides can enable what the chart's values disable.
func TestHelmDependenciesAsHelmInstalls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides string
		want      []string
		color     string
	}{
		{name: "disabled by condition and tag", want: []string{"ConfigMap/web-app", "ConfigMap/web-lib"}, color: "blue"},
		{name: "enabled by the overrides", overrides: "postgresql:\n  enabled: true\ntags:\n  cache: true\n",
			want:  []string{"ConfigMap/web-app", "ConfigMap/web-lib", "ConfigMap/web-postgresql", "ConfigMap/web-redis"},
			color: "blue"},
		{name: "an override beats an imported value", overrides: "color: green\n",
			want: []string{"ConfigMap/web-app", "ConfigMap/web-lib"}, color: "green"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, typ, err := Render(umbrella(), Input{ReleaseName: "web", Namespace: "team-a",
				Overrides: []byte(tc.overrides)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(typ).To(Equal(Helm))
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
				if o.GetName() == "web-app" {
					g.Expect(o.Object["data"]).To(HaveKeyWithValue("color", tc.color))
				}
			}
			g.Expect(got).To(ConsistOf(tc.want))
		})
	}
}
