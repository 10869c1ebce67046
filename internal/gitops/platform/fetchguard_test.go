package platform

import (
	"testing"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// TestAllowRepositoriesReachesTheSourceStage: the manager's --gitops-repository-allow-cidrs becomes the source
// stage's --repository-allow-cidrs; without exemptions nothing is added.
func TestAllowRepositoriesReachesTheSourceStage(t *testing.T) {
	g := NewWithT(t)
	d := Deployment(platform(), gitopsv1alpha1.StageSource)
	before := append([]string(nil), d.Spec.Template.Spec.Containers[0].Args...)
	AllowRepositories(d, nil)
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal(before))
	AllowRepositories(d, []string{"10.20.0.0/16", "fd00:1::/64"})
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--repository-allow-cidrs=10.20.0.0/16,fd00:1::/64"))
}
