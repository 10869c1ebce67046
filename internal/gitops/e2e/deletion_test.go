package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
)

// TestDeletingASourceTargetPrunesWhatItDeployed: deleting a source target removes what it deployed (through the
// pruner, as the tenant's pruner identity) before the target itself goes; with the opt-out annotation its
// objects stay and the target goes at once.
func TestDeletingASourceTargetPrunesWhatItDeployed(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	deployOK(t, ns, r, map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1"),
		"deploy/b.yaml": configMapYAML("b", "", "1")})
	// The source handler guards every deployed target with its finalizer.
	Eventually(func(g Gomega) {
		g.Expect(mustCM(ctx, ns, "web").Finalizers).To(ContainElement(source.FinalizerPrune))
	}, 30*time.Second).Should(Succeed())

	Expect(env.Client.Delete(ctx, mustCM(ctx, ns, "web"))).To(Succeed())
	Eventually(func(g Gomega) {
		for _, name := range []string{"a", "b", "katastroma-inventory-web", "web"} {
			_, err := getCM(ctx, ns, name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s still exists (err %v)", name, err)
		}
	}, 60*time.Second).Should(Succeed())

	// Opt-out: the objects are left where they are.
	sourceTarget(ctx, ns, "keep", r, "deploy", "")
	sha, changed := r.commit(map[string]*string{"deploy/c.yaml": configMapYAML("c", "", "1")})
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))
	Expect(root.Status.Code).NotTo(BeEquivalentTo(2), root.Status.Description) // codes.Error
	Eventually(func(g Gomega) {
		g.Expect(mustCM(ctx, ns, "keep").Finalizers).To(ContainElement(source.FinalizerPrune))
	}, 30*time.Second).Should(Succeed())
	keep := mustCM(ctx, ns, "keep")
	keep.Annotations[source.AnnotationOrphanOnDelete] = "true"
	Expect(env.Client.Update(ctx, keep)).To(Succeed())
	Expect(env.Client.Delete(ctx, mustCM(ctx, ns, "keep"))).To(Succeed())
	Eventually(func() bool {
		_, err := getCM(ctx, ns, "keep")
		return apierrors.IsNotFound(err)
	}, 30*time.Second).Should(BeTrue())
	Expect(mustCM(ctx, ns, "c").Labels).To(HaveKey(pipeline.LabelSourceTarget), "orphaned, not pruned")
}
