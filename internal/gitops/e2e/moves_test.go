package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
)

// TestPruneDisabledKeepsAnObject: an object annotated katastroma.org/prune: disabled stays when the commit no
// longer has it (and leaves the inventory), while its neighbour is pruned.
func TestPruneDisabledKeepsAnObject(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	keep := s("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations: {katastroma.org/prune: disabled}\n" +
		"data:\n  value: \"1\"\n")
	deployOK(t, ns, r, map[string]*string{"deploy/keep.yaml": keep, "deploy/gone.yaml": configMapYAML("gone", "", "1"),
		"deploy/a.yaml": configMapYAML("a", "", "1")})
	Expect(mustCM(ctx, ns, "keep").Data).To(HaveKeyWithValue("value", "1"))

	deployOK(t, ns, r, map[string]*string{"deploy/keep.yaml": nil, "deploy/gone.yaml": nil})
	_, err := getCM(ctx, ns, "gone")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "gone was not pruned: %v", err)
	Expect(mustCM(ctx, ns, "keep").Data).To(HaveKeyWithValue("value", "1"), "the opted-out object was pruned")
	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Prune).To(BeEmpty(), "the kept object is forgotten, not retried")
	Expect(inventoryKeys(ctx, ns)).To(ConsistOf("ConfigMap/a"))
}
