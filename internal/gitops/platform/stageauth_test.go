package platform

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// TestEveryStageAcceptsOnlyItsPlatformsStages: every listener of a Platform — the six pipeline stages' gRPC
// servers and pharos's OTLP ports — accepts calls only with a token of the Platform's stages, and every stage,
// since each calls another (pharos the source handler's Replay), mounts its projected ServiceAccount token for
// the stage audience; each stage's ServiceAccount may review tokens and read the namespace and Tenant the work
// names; the collector configuration sends the collector's token to pharos.
func TestEveryStageAcceptsOnlyItsPlatformsStages(t *testing.T) {
	NewWithT(t).Expect(StageAudience).To(Equal(stage.Audience))
	p := platform()
	for _, name := range Stages {
		g := NewWithT(t)
		args := Args(p, name)
		g.Expect(args).To(ContainElement("--stage-callers="+p.Namespace), name)
		g.Expect(args).To(ContainElement("--stage-token-file="+StageTokenPath), name)
		pod := Deployment(p, name).Spec.Template.Spec
		tokenSource := HaveField("ServiceAccountToken", And(HaveField("Audience", stage.Audience), HaveField("Path", "token")))
		g.Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "stage-token"),
			HaveField("Projected.Sources", ContainElement(tokenSource)))), name)
		g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "stage-token",
			MountPath: "/var/run/secrets/katastroma/stage", ReadOnly: true}), name)
		g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeTrue()), "%s reviews tokens with the API server", name)

		role := StageClusterRole(name)
		g.Expect(role).NotTo(BeEmpty(), "%s is bound to a shipped role", name)
		rules := ShippedRules(role)
		for _, want := range []struct{ group, resource, verb string }{{"authentication.k8s.io", "tokenreviews", "create"},
			{"", "namespaces", "get"}, {gitopsv1alpha1.GroupVersion.Group, "tenants", "get"}} {
			g.Expect(rules).To(ContainElement(And(HaveField("APIGroups", ContainElement(want.group)),
				HaveField("Resources", ContainElement(want.resource)), HaveField("Verbs", ContainElement(want.verb)))),
				"%s (%s) may %s %s", name, role, want.verb, want.resource)
		}
	}
	g := NewWithT(t)
	callerCheck := ShippedNamePrefix + "katastroma-caller-check" // renderer, orderer, labeler and pharos
	g.Expect(StageClusterRole(gitopsv1alpha1.StageRenderer)).To(Equal(callerCheck))
	g.Expect(SharedBindingNames()).To(ContainElement(callerCheck))
	g.Expect(BindableClusterRoles()).To(ContainElement(callerCheck))
	collector := CollectorConfigMap(p).Data["collector.yaml"]
	g.Expect(collector).To(ContainSubstring("bearertokenauth/pharos:\n    filename: " + StageTokenPath))
	g.Expect(collector).To(ContainSubstring("auth: {authenticator: bearertokenauth/pharos}"))
	g.Expect(collector).To(ContainSubstring("extensions: [bearertokenauth/pharos]"))
}
