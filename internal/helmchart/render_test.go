package helmchart

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestTemplateRender(t *testing.T) {
	for _, tc := range []struct {
		name    string
		build   func(t *template) map[string]any
		cond    string
		want    []string
		wantErr string
	}{
		{
			name: "inline value",
			build: func(t *template) map[string]any {
				return map[string]any{"spec": map[string]any{"replicas": t.Inline("{{ .Values.replicaCount }}")}}
			},
			want: []string{"spec:\n  replicas: {{ .Values.replicaCount }}\n"},
		},
		{
			name: "block in a map gets the key's indentation",
			build: func(t *template) map[string]any {
				return map[string]any{"metadata": map[string]any{"labels": map[string]any{
					"a": "b", t.Block(func(indent string) string { return indent + "BLOCK\n" }): "",
				}}}
			},
			want: []string{"  labels:\n    a: b\n    BLOCK\n"},
		},
		{
			name: "block as a list item gets the dash's column",
			build: func(t *template) map[string]any {
				return map[string]any{"args": []any{"--x", t.Block(func(indent string) string { return indent + "- --y\n" })}}
			},
			want: []string{"args:\n- --x\n- --y\n"},
		},
		{
			name: "a placeholder key never takes a list item's dash",
			build: func(t *template) map[string]any {
				return map[string]any{"items": []any{map[string]any{
					"name": "x", t.Block(func(indent string) string { return indent + "extra: 1\n" }): "",
				}}}
			},
			want: []string{"items:\n- name: x\n  extra: 1\n"},
		},
		{
			name: "condition wraps the object, before the header comment",
			build: func(t *template) map[string]any {
				return map[string]any{"kind": "NetworkPolicy"}
			},
			cond: ".Values.networkPolicy.enabled",
			want: []string{"{{- if .Values.networkPolicy.enabled }}\n# Generated", "kind: NetworkPolicy\n{{- end }}\n"},
		},
		{
			name: "the install namespace becomes the release namespace everywhere",
			build: func(t *template) map[string]any {
				return map[string]any{"metadata": map[string]any{"namespace": InstallNamespace},
					"dnsNames": []any{"svc." + InstallNamespace + ".svc"}}
			},
			want: []string{"- svc.{{ .Release.Namespace }}.svc\n", "namespace: {{ .Release.Namespace }}\n"},
		},
		{
			name: "a placeholder that does not reach the output is an error",
			build: func(t *template) map[string]any {
				t.Inline("{{ .Values.lost }}")
				return map[string]any{"kind": "Service"}
			},
			wantErr: "1 placeholders were set but 0 appear",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tmpl := newTemplate(nil)
			tmpl.obj = tc.build(tmpl)
			tmpl.condition = tc.cond
			out, err := tmpl.Render()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(out).To(ContainSubstring(w))
			}
			g.Expect(strings.Contains(out, "zz_helm_")).To(BeFalse(), "no placeholder is left:\n%s", out)
		})
	}
}
