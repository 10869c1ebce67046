package renderer

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

const cmYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
data:
  k: v
`

func cmDoc(name string) string { return strings.ReplaceAll(cmYAML, "%s", name) }

const chartYAML = `apiVersion: v2
name: demo
version: 0.1.0
`

const chartTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cfg
  namespace: {{ .Release.Namespace }}
data:
  color: {{ .Values.color | quote }}
`

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`

const hookJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {"helm.sh/hook": "pre-install,post-upgrade"}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: busybox}]}}}
`

func kinds(t *testing.T, files map[string][]byte, in Input) ([]string, Type, error) {
	t.Helper()
	objs, typ, err := Render(files, in)
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out, typ, err
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		in      Input
		typ     Type
		want    []string
		wantErr string
	}{
		{
			name:  "plain joins every yaml file in path order and ignores other files",
			files: map[string]string{"b.yaml": cmDoc("b"), "a/x.yml": cmDoc("a") + "---\n" + cmDoc("a2"), "README.md": "# x"},
			typ:   Plain, want: []string{"ConfigMap/a", "ConfigMap/a2", "ConfigMap/b"},
		},
		{
			name:  "plain without manifests renders nothing",
			files: map[string]string{"README.md": "hi"}, typ: Plain,
		},
		{
			name: "kustomize builds with an in-memory filesystem",
			files: map[string]string{
				"kustomization.yaml":      "resources: [base]\nnamePrefix: p-\n",
				"base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": cmDoc("c"),
			},
			typ: Kustomize, want: []string{"ConfigMap/p-c"},
		},
		{
			name:  "kustomize refuses remote resources",
			files: map[string]string{"kustomization.yaml": "resources: [\"https://github.com/org/repo//deploy?ref=main\"]\n"},
			typ:   Kustomize, wantErr: "remote resource",
		},
		{
			name:  "kustomize refuses helmCharts",
			files: map[string]string{"kustomization.yaml": "helmCharts: [{name: x}]\n"},
			typ:   Kustomize, wantErr: "helmCharts is not supported",
		},
		{
			name: "helm renders with overrides, release name and namespace, CRDs included",
			files: map[string]string{"Chart.yaml": chartYAML, "values.yaml": "color: red\n",
				"templates/cm.yaml": chartTemplate, "templates/NOTES.txt": "hello", "crds/w.yaml": crdYAML},
			in:  Input{ReleaseName: "web", Namespace: "team-a", Overrides: []byte("color: blue\n")},
			typ: Helm, want: []string{"CustomResourceDefinition/widgets.example.com", "ConfigMap/web-cfg"},
		},
		{
			name: "kustomize builds an overlay at the target path with its ../base",
			files: map[string]string{
				"envs/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
				"base/kustomization.yaml":      "resources: [cm.yaml]\n", "base/cm.yaml": cmDoc("c"),
				"envs/dev/kustomization.yaml": "helmCharts: [{name: x}]\n",
			},
			in:  Input{Path: "envs/prod"},
			typ: Kustomize, want: []string{"ConfigMap/prod-c"},
		},
		{
			name: "kustomize refuses remote resources reached through a base",
			files: map[string]string{
				"envs/prod/kustomization.yaml": "resources: [../../base]\n",
				"base/kustomization.yaml":      "resources: [\"github.com/org/repo/deploy?ref=main\"]\n",
			},
			in:  Input{Path: "envs/prod"},
			typ: Kustomize, wantErr: "base/kustomization.yaml: remote resource",
		},
		{
			name:  "plain renders only the target path",
			files: map[string]string{"app/a.yaml": cmDoc("a"), "other/b.yaml": cmDoc("b")},
			in:    Input{Path: "app"}, typ: Plain, want: []string{"ConfigMap/a"},
		},
		{
			name:  "helm renders the chart at the target path",
			files: map[string]string{"charts/web/Chart.yaml": chartYAML, "charts/web/templates/cm.yaml": chartTemplate},
			in:    Input{ReleaseName: "web", Namespace: "team-a", Path: "charts/web"},
			typ:   Helm, want: []string{"ConfigMap/web-cfg"},
		},
		{
			name: "helm skips hooks when the target says so and renders the rest",
			files: map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": chartTemplate,
				"templates/job.yaml": hookJob},
			in:  Input{ReleaseName: "web", Namespace: "team-a", HelmHooks: HooksSkip},
			typ: Helm, want: []string{"ConfigMap/web-cfg"},
		},
		{
			name: "helm refuses a chart with install hooks by default, naming them",
			files: map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": chartTemplate,
				"templates/job.yaml": hookJob},
			in:  Input{ReleaseName: "web", Namespace: "team-a"},
			typ: Helm, wantErr: `Job/migrate (pre-install,post-upgrade) in demo/templates/job.yaml; set the source target's data.helm-hooks to "skip"`,
		},
		{
			name: "helm skips test hooks without a policy",
			files: map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": chartTemplate,
				"templates/test.yaml": strings.Replace(hookJob, "pre-install,post-upgrade", "test", 1)},
			in:  Input{ReleaseName: "web", Namespace: "team-a"},
			typ: Helm, want: []string{"ConfigMap/web-cfg"},
		},
		{
			name:  "helm refuses an unknown hook policy, naming the field",
			files: map[string]string{"Chart.yaml": chartYAML, "templates/cm.yaml": chartTemplate},
			in:    Input{ReleaseName: "web", Namespace: "team-a", HelmHooks: "run"},
			typ:   Helm, wantErr: `data.helm-hooks: Unsupported value: "run"`,
		},
		{
			name:  "helm reports template errors",
			files: map[string]string{"Chart.yaml": chartYAML, "templates/x.yaml": "{{ .Values.nope.deeper }}"},
			typ:   Helm, wantErr: "rendering the chart",
		},
		{
			name:  "bad overrides are reported",
			files: map[string]string{"Chart.yaml": chartYAML},
			in:    Input{Overrides: []byte("[not a map")}, typ: Helm, wantErr: "overrides",
		},
		{
			name:  "a manifest without a kind is an error",
			files: map[string]string{"x.yaml": "apiVersion: v1\nmetadata: {name: x}\n"},
			typ:   Plain, wantErr: "kind is missing",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			files := map[string][]byte{}
			for k, v := range tc.files {
				files[k] = []byte(v)
			}
			got, typ, err := kinds(t, files, tc.in)
			g.Expect(typ).To(Equal(tc.typ))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestHelmOverridesApplied(t *testing.T) {
	g := NewWithT(t)
	objs, _, err := Render(map[string][]byte{"Chart.yaml": []byte(chartYAML), "values.yaml": []byte("color: red\n"),
		"templates/cm.yaml": []byte(chartTemplate)}, Input{ReleaseName: "web", Namespace: "team-a",
		Overrides: []byte("color: blue\n")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].GetNamespace()).To(Equal("team-a"))
	g.Expect(objs[0].Object["data"]).To(HaveKeyWithValue("color", "blue"))
}

func TestUntar(t *testing.T) {
	g := NewWithT(t)
	b, err := pipeline.TarFiles(map[string][]byte{"a.yaml": []byte("x"), "d/b.yaml": []byte("yy")})
	g.Expect(err).NotTo(HaveOccurred())
	files, err := Untar(bytes.NewReader(b), DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(2))
	g.Expect(string(files["d/b.yaml"])).To(Equal("yy"))

	_, err = Untar(bytes.NewReader(b), Limits{MaxBytes: 2, MaxFiles: 10})
	g.Expect(err).To(MatchError(ContainSubstring("larger than 2 bytes")))
	_, err = Untar(bytes.NewReader(b), Limits{MaxBytes: 100, MaxFiles: 1})
	g.Expect(err).To(MatchError(ContainSubstring("more than 1 files")))
	evil, err := pipeline.TarFiles(map[string][]byte{"../etc/passwd": []byte("x")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Untar(bytes.NewReader(evil), DefaultLimits)
	g.Expect(err).To(MatchError(ContainSubstring("escapes")))
}

func FuzzUntar(f *testing.F) {
	b, _ := pipeline.TarFiles(map[string][]byte{"a.yaml": []byte(cmDoc("a"))})
	f.Add(b)
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := Untar(bytes.NewReader(data), Limits{MaxBytes: 1 << 20, MaxFiles: 100})
		if err == nil {
			_, _, _ = Render(files, Input{ReleaseName: "r", Namespace: "n"})
		}
	})
}

func TestHelmHooksAreReportedAsSkipped(t *testing.T) {
	g := NewWithT(t)
	out, err := RenderAll(map[string][]byte{"Chart.yaml": []byte(chartYAML), "templates/job.yaml": []byte(hookJob),
		"templates/cm.yaml": []byte(chartTemplate)}, Input{ReleaseName: "web", Namespace: "team-a", HelmHooks: HooksSkip})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Objects).To(HaveLen(1))
	g.Expect(out.SkippedHooks).To(Equal([]Hook{{Kind: "Job", Name: "migrate", Path: "demo/templates/job.yaml",
		Events: []string{"pre-install", "post-upgrade"}}}))
	g.Expect(out.SkippedHooks[0].String()).To(Equal("Job/migrate (pre-install,post-upgrade)"))
}
