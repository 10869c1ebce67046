package pipeline

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestEnclosingRoot(t *testing.T) {
	repo := MapTree{
		"base/kustomization.yaml":           []byte("resources: [cm.yaml]\n"),
		"base/cm.yaml":                      []byte("x"),
		"envs/prod/kustomization.yaml":      []byte("resources: [../../base, ../common, svc.yaml]\n"),
		"envs/common/kustomization.yaml":    []byte("components: [../../components/tls]\n"),
		"components/tls/kustomization.yaml": []byte("kind: Component\n"),
		"envs/dev/kustomization.yaml":       []byte("resources: [../shared]\n"),
		"envs/shared/kustomization.yaml":    []byte("resources: [cm.yaml]\n"),
		"apps/web/a/kustomization.yaml":     []byte("resources: [../shared/cm.yaml, https://example.com/x.yaml]\n"),
		"apps/web/shared/cm.yaml":           []byte("x"),
		"plain/cm.yaml":                     []byte("x"),
		"loop/kustomization.yaml":           []byte("resources: [.]\n"),
		"escape/kustomization.yaml":         []byte("resources: [../../etc]\n"),
		// Generators, transformers and validators are built like resources: their directories are shipped.
		"gen/app/kustomization.yaml":  []byte("generators: [../gens]\n"),
		"gen/gens/kustomization.yaml": []byte("resources: [g.yaml]\n"),
		"tr/app/kustomization.yaml":   []byte("transformers: [../trs/t.yaml]\n"),
		"tr/trs/t.yaml":               []byte("x"),
		"val/app/kustomization.yaml":  []byte("validators: [../vals]\n"),
		"val/vals/kustomization.yaml": []byte("resources: [v.yaml]\n"),
		"trescape/kustomization.yaml": []byte("transformers: [../../etc]\n"),
		"inline/kustomization.yaml":   []byte("transformers:\n- |\n  apiVersion: builtin\n  kind: LabelTransformer\n  metadata: {name: l}\n"),
	}
	for _, tc := range []struct {
		target, root, rel, err string
		// inputs are the paths outside target its render reads.
		inputs []string
	}{
		{target: "plain", root: "plain"},
		{target: "base", root: "base"},
		{target: "envs/dev", root: "envs", rel: "dev", inputs: []string{"envs/shared"}},
		{target: "envs/prod", root: "", rel: "envs/prod", inputs: []string{"base", "components/tls", "envs/common"}},
		{target: "apps/web/a", root: "apps/web", rel: "a", inputs: []string{"apps/web/shared/cm.yaml"}},
		{target: "loop", root: "loop"},
		{target: "", root: ""},
		{target: "escape", err: `escape/kustomization.yaml: "../../etc" lies outside the repository`},
		{target: "gen/app", root: "gen", rel: "app", inputs: []string{"gen/gens"}},
		{target: "tr/app", root: "tr", rel: "app", inputs: []string{"tr/trs/t.yaml"}},
		{target: "val/app", root: "val", rel: "app", inputs: []string{"val/vals"}},
		{target: "trescape", err: `trescape/kustomization.yaml: "../../etc" lies outside the repository`},
		{target: "inline", root: "inline"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			g := NewWithT(t)
			root, err := EnclosingRoot(repo, tc.target)
			if tc.err != "" {
				g.Expect(err).To(MatchError(tc.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(root).To(Equal(tc.root))
			g.Expect(RelPath(root, tc.target)).To(Equal(tc.rel))
			_, inputs, err := RenderInputs(repo, tc.target)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(inputs).To(Equal(tc.inputs))
		})
	}
}

func TestLimitsCheck(t *testing.T) {
	g := NewWithT(t)
	l := Limits{MaxBytes: 100, MaxFiles: 2}
	g.Expect(l.Check("ns/t", "deploy", 2, 100)).To(Succeed())
	g.Expect(l.Check("ns/t", "deploy", 3, 1)).To(MatchError(
		`source target ns/t: the subtree "deploy" shipped to the renderer has more than 2 files (the render limit is 100 bytes, 2 files)`))
	g.Expect(l.Check("ns/t", "", 1, 101)).To(MatchError(
		`source target ns/t: the subtree "/" shipped to the renderer is larger than 100 bytes (the render limit is 100 bytes, 2 files)`))
}

func TestKustomizationReferences(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    Kustomization
		want []string
	}{
		{name: "empty"},
		{name: "resources, bases, components", k: Kustomization{Resources: []string{"a"}, Bases: []string{"b"},
			Components: []string{"c"}}, want: []string{"a", "b", "c"}},
		{name: "generators", k: Kustomization{Generators: []string{"https://example.com/g.yaml", "../gens"}},
			want: []string{"https://example.com/g.yaml", "../gens"}},
		{name: "transformers", k: Kustomization{Transformers: []string{"t.yaml"}}, want: []string{"t.yaml"}},
		{name: "validators", k: Kustomization{Validators: []string{"github.com/o/r/v?ref=x"}},
			want: []string{"github.com/o/r/v?ref=x"}},
		{name: "inline configuration is no reference", k: Kustomization{Transformers: []string{"apiVersion: builtin\nkind: X\n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.k.References()).To(ConsistOf(tc.want))
		})
	}
}
