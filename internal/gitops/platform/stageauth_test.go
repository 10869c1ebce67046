package platform

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// TestTenantWritingStagesAcceptOnlyTheirPlatformsStages: the provisioner and the pruner, which write and delete
// as the tenants, accept calls only with a token of their Platform's stages; the labeler and the provisioner,
// which call them, send their projected ServiceAccount token for the stage audience.
func TestTenantWritingStagesAcceptOnlyTheirPlatformsStages(t *testing.T) {
	NewWithT(t).Expect(StageAudience).To(Equal(stage.Audience))
	p := platform()
	for name, want := range map[string]struct{ callers, token bool }{
		"labeler": {token: true}, "provisioner": {callers: true, token: true}, "pruner": {callers: true},
		"renderer": {}, "orderer": {}, "source": {},
	} {
		g := NewWithT(t)
		args := Args(p, name)
		if want.callers {
			g.Expect(args).To(ContainElement("--stage-callers="+p.Namespace), name)
		} else {
			g.Expect(args).NotTo(ContainElement(HavePrefix("--stage-callers")), name)
		}
		d := Deployment(p, name)
		pod := d.Spec.Template.Spec
		if !want.token {
			g.Expect(args).NotTo(ContainElement(HavePrefix("--stage-token-file")), name)
			continue
		}
		g.Expect(args).To(ContainElement("--stage-token-file="+StageTokenPath), name)
		tokenSource := HaveField("ServiceAccountToken", And(HaveField("Audience", stage.Audience), HaveField("Path", "token")))
		g.Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "stage-token"),
			HaveField("Projected.Sources", ContainElement(tokenSource)))), name)
		g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "stage-token",
			MountPath: "/var/run/secrets/katastroma/stage", ReadOnly: true}), name)
	}
	// The stage ServiceAccounts of the serving stages may review tokens.
	for _, role := range []string{ProvisionerClusterRole, PrunerClusterRole} {
		NewWithT(t).Expect(ShippedRules(role)).To(ContainElement(And(HaveField("APIGroups", ConsistOf("authentication.k8s.io")),
			HaveField("Resources", ConsistOf("tokenreviews")), HaveField("Verbs", ConsistOf("create")))), role)
	}
}
