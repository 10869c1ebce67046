package renderer

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestRenderOverTheLimitNamesTheLimitAndTheTarget: a subtree over the renderer's limit fails InvalidArgument with
// a message naming the limit and the source target.
func TestRenderOverTheLimitNamesTheLimitAndTheTarget(t *testing.T) {
	g := NewWithT(t)
	ctx, err := pipeline.WithContext(context.Background(), pipeline.Context{Namespace: "team-a", SourceTarget: "web",
		Path: "deploy", LeaseID: "l"})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := pipeline.TarFiles(map[string][]byte{"a.yaml": []byte(cmDoc("a")), "b.yaml": []byte(cmDoc("b"))})
	g.Expect(err).NotTo(HaveOccurred())
	for _, tc := range []struct {
		lim  Limits
		want string
	}{
		{Limits{MaxBytes: 1 << 20, MaxFiles: 1}, "more than 1 files (the render limit is 1048576 bytes, 1 files)"},
		{Limits{MaxBytes: 10, MaxFiles: 100}, "larger than 10 bytes (the render limit is 10 bytes, 100 files)"},
	} {
		s := &Server{Limits: tc.lim}
		_, _, err = s.render(ctx, pipeline.Chunks(b))
		g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
		g.Expect(err).To(MatchError(And(ContainSubstring(`source target team-a/web (path "deploy")`),
			ContainSubstring(tc.want))))
	}
}

// TestRenderAtTheTargetPath: the target path of the shipped subtree arrives as metadata; one that leaves the files
// is refused.
func TestRenderAtTheTargetPath(t *testing.T) {
	g := NewWithT(t)
	ctx, err := pipeline.WithContext(context.Background(), pipeline.Context{Namespace: "team-a", SourceTarget: "web",
		LeaseID: "l"})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := pipeline.TarFiles(map[string][]byte{"overlay/kustomization.yaml": []byte("resources: [../base]\n"),
		"base/kustomization.yaml": []byte("resources: [cm.yaml]\n"), "base/cm.yaml": []byte(cmDoc("c"))})
	g.Expect(err).NotTo(HaveOccurred())
	s := &Server{}
	in := metadata.NewIncomingContext(ctx, metadata.Pairs(pipeline.MDTargetPath, "overlay"))
	out, hooks, err := s.render(in, pipeline.Chunks(b))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hooks).To(BeEmpty())
	g.Expect(out).To(HaveLen(1))
	u, err := pipeline.Decode(out[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.GetName()).To(Equal("c"))

	in = metadata.NewIncomingContext(ctx, metadata.Pairs(pipeline.MDTargetPath, "../x"))
	_, _, err = s.render(in, pipeline.Chunks(b))
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
}
