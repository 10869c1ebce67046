package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	ktypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// Targets and tunnel matches of a held-back profile are left out of the plan (gNMIc crashes applying a
// subscription to a target whose TLS file is missing); the rest of the Pipeline is pushed.
func TestHeldBackProfilesTargetsAndTunnelMatchesAreLeftOut(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.CollectorImage = "ghcr.io/openconfig/gnmic:0.47.0"
	s.Profiles[ktypes.NamespacedName{Namespace: "lab", Name: "edge"}] = &v1.TargetProfile{ObjectMeta: meta("lab", "edge", nil)}
	s.Targets[1].Spec.Profile = "edge"
	s.TunnelTargetPolicies = []v1.TunnelTargetPolicy{{ObjectMeta: meta("lab", "srl", nil), Spec: v1.TunnelTargetPolicySpec{
		Match: &v1.TunnelTargetMatch{Type: "srl", ID: "^leaf"}, Profile: "default"}}}
	s.Pipelines = []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true,
		TargetRefs: []string{"r1", "r2", "r3"}, SubscriptionRefs: []string{"ifaces"}, TunnelTargetPolicyRefs: []string{"srl"}})}

	all := Build(s)
	g.Expect(keys(all.Config.Targets)).To(ConsistOf("lab/r1", "lab/r2", "lab/r3"))
	g.Expect(all.Config.TunnelTargetMatches).To(HaveKey("lab/srl"))

	s.HeldBack = map[ktypes.NamespacedName]string{{Namespace: "lab", Name: "default"}: "CA bundle ConfigMap/device-ca key ca.crt not found"}
	held := Build(s)
	g.Expect(keys(held.Config.Targets)).To(ConsistOf("lab/r2"), "only the target whose profile's files are in place")
	g.Expect(held.Config.TunnelTargetMatches).To(BeEmpty())
	g.Expect(held.Config.Subscriptions).To(HaveKey("lab/p/ifaces"))
	g.Expect(held.Pipelines["lab/p"].Targets).To(Equal(1))
}
