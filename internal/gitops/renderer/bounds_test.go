package renderer

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestAnExplodingChartFailsOnlyItsTenant: a chart whose template loops far beyond any real chart fails its own
// event within the render time limit with a reason naming the limit, while another tenant's render runs at the
// same time; a render whose output is over the output bound fails naming it.
func TestAnExplodingChartFailsOnlyItsTenant(t *testing.T) {
	g := NewWithT(t)
	tenantCtx := func(tenant string) context.Context {
		ctx, err := pipeline.WithContext(context.Background(), pipeline.Context{Tenant: tenant, Namespace: tenant,
			SourceTarget: "web", LeaseID: "l"})
		g.Expect(err).NotTo(HaveOccurred())
		return ctx
	}
	exploding, err := pipeline.TarFiles(map[string][]byte{
		"Chart.yaml":          []byte("apiVersion: v2\nname: boom\nversion: 0.1.0\n"),
		"templates/boom.yaml": []byte("{{- range until 3000000 }}# {{ . }}\n{{ end }}"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	plain, err := pipeline.TarFiles(map[string][]byte{"a.yaml": []byte(cmDoc("a"))})
	g.Expect(err).NotTo(HaveOccurred())

	s := &Server{RenderTimeout: 300 * time.Millisecond}
	var wg sync.WaitGroup
	var boomErr error
	var took time.Duration
	started := make(chan struct{})
	wg.Go(func() {
		start := time.Now()
		close(started)
		_, _, boomErr = s.render(tenantCtx("noisy"), pipeline.Chunks(exploding))
		took = time.Since(start)
	})
	// The quiet tenant renders while the noisy render runs (it runs for its whole 300 ms limit).
	<-started
	out, _, err := s.render(tenantCtx("quiet"), pipeline.Chunks(plain))
	g.Expect(err).NotTo(HaveOccurred(), "another tenant renders meanwhile")
	g.Expect(out).To(HaveLen(1))
	wg.Wait()
	g.Expect(status.Code(boomErr)).To(Equal(codes.ResourceExhausted))
	g.Expect(boomErr).To(MatchError(ContainSubstring("render time limit of 300ms")))
	g.Expect(took).To(BeNumerically("<", 5*time.Second))

	small := &Server{MaxOutputBytes: 64}
	_, _, err = small.render(tenantCtx("quiet"), pipeline.Chunks(plain))
	g.Expect(status.Code(err)).To(Equal(codes.ResourceExhausted))
	g.Expect(err).To(MatchError(ContainSubstring("over the render output limit of 64 bytes")))
}
