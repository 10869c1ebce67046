package source

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestNormalizeRepoURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/Org/Repo.git":           "github.com/org/repo",
		"https://github.com/org/repo":               "github.com/org/repo",
		"https://github.com/org/repo/":              "github.com/org/repo",
		"https://token@github.com:443/org/repo.git": "github.com/org/repo",
		"git@github.com:org/repo.git":               "github.com/org/repo",
		"ssh://git@github.com/org/repo.git":         "github.com/org/repo",
		"git://github.com/org/repo":                 "github.com/org/repo",
		"github.com/org/repo":                       "github.com/org/repo",
		"http://127.0.0.1:9418/repo.git":            "127.0.0.1/repo",
	} {
		t.Run(in, func(t *testing.T) {
			NewWithT(t).Expect(NormalizeRepoURL(in)).To(Equal(want))
		})
	}
}

func TestUnderPath(t *testing.T) {
	for _, tc := range []struct {
		dir, file string
		want      bool
	}{
		{"deploy", "deploy/a.yaml", true},
		{"deploy", "deploy/x/b.yaml", true},
		{"deploy/", "deploy/a.yaml", true},
		{"/deploy", "deploy/a.yaml", true},
		{"deploy", "deploy2/a.yaml", false},
		{"deploy", "other/deploy/a.yaml", false},
		{"deploy/prod", "deploy/production/a.yaml", false},
		{"", "anything.yaml", true},
		{".", "a/b.yaml", true},
		{"/", "a/b.yaml", true},
	} {
		t.Run(tc.dir+"|"+tc.file, func(t *testing.T) {
			NewWithT(t).Expect(UnderPath(tc.dir, tc.file)).To(Equal(tc.want))
		})
	}
}

func TestMatches(t *testing.T) {
	target := Target{RepoURL: "git@github.com:org/repo.git", Ref: "main", Path: "deploy"}
	push := Push{Ref: "refs/heads/main", RepoURLs: []string{"https://github.com/org/repo.git"},
		Files: []string{"README.md", "deploy/a.yaml"}}
	for _, tc := range []struct {
		name   string
		mutate func(*Target, *Push)
		want   bool
	}{
		{"match across URL forms and short ref", func(*Target, *Push) {}, true},
		{"other ref", func(_ *Target, p *Push) { p.Ref = "refs/heads/dev" }, false},
		{"full ref in the target", func(t *Target, _ *Push) { t.Ref = "refs/heads/main" }, true},
		{"other repo", func(_ *Target, p *Push) { p.RepoURLs = []string{"https://github.com/org/other"} }, false},
		{"no file under the path", func(_ *Target, p *Push) { p.Files = []string{"deploy2/a.yaml"} }, false},
		{"root path matches any file", func(t *Target, p *Push) { t.Path = ""; p.Files = []string{"x"} }, true},
		// A force-push (a rollback) lists files relative to a history the target may never have deployed, and a
		// push without file lists (a new branch, a tag) lists none: both are matched by ref and re-evaluated.
		{"force-push matched by ref", func(_ *Target, p *Push) { p.Forced = true; p.Files = []string{"deploy2/a.yaml"} }, true},
		{"push without file lists matched by ref", func(_ *Target, p *Push) { p.Files = nil }, true},
		{"force-push to another ref", func(_ *Target, p *Push) { p.Forced = true; p.Ref = "refs/heads/dev" }, false},
		// An overlay's render reads its base: a push changing only the base concerns it.
		{"change to a base the last render read", func(t *Target, p *Push) {
			t.Path, t.Inputs = "envs/prod", []string{"base", "components/tls"}
			p.Files = []string{"base/cm.yaml"}
		}, true},
		{"change to a file input", func(t *Target, p *Push) {
			t.Path, t.Inputs = "envs/prod", []string{"shared/cm.yaml"}
			p.Files = []string{"shared/cm.yaml"}
		}, true},
		{"change beside the inputs", func(t *Target, p *Push) {
			t.Path, t.Inputs = "envs/prod", []string{"base"}
			p.Files = []string{"base2/cm.yaml", "envs/dev/x.yaml"}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, p := target, push
			tc.mutate(&tg, &p)
			NewWithT(t).Expect(tg.Matches(p)).To(Equal(tc.want))
		})
	}
}

func FuzzNormalizeRepoURL(f *testing.F) {
	for _, s := range []string{"https://github.com/org/repo.git", "git@github.com:org/repo", "::", "a@b:c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizeRepoURL(s)
		if NormalizeRepoURL(n) != n && n != "" {
			// Normalising is idempotent for every form it understands.
			t.Logf("not idempotent: %q → %q → %q", s, n, NormalizeRepoURL(n))
		}
		_ = UnderPath(s, s)
	})
}

func TestParsePushForced(t *testing.T) {
	g := NewWithT(t)
	sha := "0123456789012345678901234567890123456789"
	p, err := ParsePush([]byte(`{"ref":"refs/heads/main","after":"` + sha + `","forced":true,` +
		`"repository":{"clone_url":"https://github.com/org/repo.git"},"commits":[]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Forced).To(BeTrue())
	g.Expect(p.Files).To(BeEmpty())
}

func TestRenderInputsRoundTrip(t *testing.T) {
	g := NewWithT(t)
	g.Expect(encodeInputs(nil)).To(BeEmpty(), "no annotation when the render reads only the target path")
	v := encodeInputs([]string{"base", "components/tls"})
	g.Expect(decodeInputs(v)).To(Equal([]string{"base", "components/tls"}))
	g.Expect(decodeInputs("not json")).To(BeNil())
	cm := &corev1.ConfigMap{Data: map[string]string{"repo-url": "u", "ref": "main", "path": "envs/prod"}}
	cm.Annotations = map[string]string{AnnotationRenderInputs: v}
	tg, err := TargetFromConfigMap(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tg.Inputs).To(Equal([]string{"base", "components/tls"}))
}
