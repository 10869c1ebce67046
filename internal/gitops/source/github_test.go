package source

import (
	"testing"

	. "github.com/onsi/gomega"
)

const samplePush = `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000",
"after":"1111111111111111111111111111111111111111","deleted":false,
"repository":{"clone_url":"https://github.com/org/repo.git","ssh_url":"git@github.com:org/repo.git",
"html_url":"https://github.com/org/repo"},
"commits":[{"added":["deploy/a.yaml"],"removed":["deploy/b.yaml"],"modified":["README.md"]}],
"head_commit":{"id":"1111111111111111111111111111111111111111"}}`

func TestSignature(t *testing.T) {
	g := NewWithT(t)
	body := []byte(samplePush)
	sig := Sign([]byte("s3cret"), body)
	g.Expect(sig).To(HavePrefix("sha256="))
	g.Expect(VerifySignature([]byte("s3cret"), body, sig)).To(BeTrue())
	g.Expect(VerifySignature([]byte("other"), body, sig)).To(BeFalse())
	g.Expect(VerifySignature([]byte("s3cret"), append(body, ' '), sig)).To(BeFalse())
	g.Expect(VerifySignature([]byte("s3cret"), body, "")).To(BeFalse())
	g.Expect(VerifySignature(nil, body, Sign(nil, body))).To(BeFalse(), "an empty secret never verifies")
}

func TestParsePush(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{name: "valid", body: samplePush},
		{name: "not json", body: "{", wantErr: "push payload"},
		{name: "short ref", body: `{"ref":"main","after":"1111111111111111111111111111111111111111"}`, wantErr: "full ref"},
		{name: "bad sha", body: `{"ref":"refs/heads/main","after":"zz"}`, wantErr: "commit SHA"},
		{name: "no repo", body: `{"ref":"refs/heads/main","after":"1111111111111111111111111111111111111111"}`,
			wantErr: "no URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := ParsePush([]byte(tc.body))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Ref).To(Equal("refs/heads/main"))
			g.Expect(p.Files).To(ConsistOf("deploy/a.yaml", "deploy/b.yaml", "README.md"))
			g.Expect(p.RepoURLs).To(ContainElement("git@github.com:org/repo.git"))
		})
	}
}

func FuzzParsePush(f *testing.F) {
	f.Add([]byte(samplePush))
	f.Add([]byte(`{"ref":"refs/heads/x","deleted":true,"repository":{"clone_url":"u"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParsePush(body)
		if err == nil && p.Ref == "" {
			t.Fatal("a parsed push has a ref")
		}
	})
}
