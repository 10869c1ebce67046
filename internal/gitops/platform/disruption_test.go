package platform

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// TestVerifyTimeoutReachesTheProvisioner: spec.verifyTimeout is the provisioner's --verify-timeout (the default
// of every target without data.verify-timeout); unset, no flag and the binary's default applies; 0s turns the
// verify off.
func TestVerifyTimeoutReachesTheProvisioner(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	for _, stage := range Stages {
		g.Expect(Args(p, stage)).NotTo(ContainElement(HavePrefix("--verify-timeout")), stage)
	}
	p.Spec.VerifyTimeout = &metav1.Duration{Duration: 4 * time.Minute}
	for _, stage := range Stages {
		if stage == gitopsv1alpha1.StageProvisioner {
			g.Expect(Args(p, stage)).To(ContainElement("--verify-timeout=4m0s"))
			continue
		}
		g.Expect(Args(p, stage)).NotTo(ContainElement(HavePrefix("--verify-timeout")), stage)
	}
	p.Spec.VerifyTimeout = &metav1.Duration{}
	g.Expect(Args(p, gitopsv1alpha1.StageProvisioner)).To(ContainElement("--verify-timeout=0s"))
	g.Expect(Validate(p)).To(BeEmpty())
}

// The verify runs inside the provisioner's call, which every stage above waits through: the Platform refuses a
// verify timeout the RPC deadline would cut (as the binary refuses the flag), naming the field.
func TestValidateVerifyTimeout(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	for _, tc := range []struct {
		name        string
		verify, rpc *metav1.Duration
		err         string
	}{
		{name: "unset"},
		{name: "below the default rpcTimeout", verify: d(4 * time.Minute)},
		{name: "off", verify: d(0)},
		{name: "the default rpcTimeout", verify: d(5 * time.Minute),
			err: `spec.verifyTimeout: Invalid value: "5m0s": must be below spec.rpcTimeout (5m0s)`},
		{name: "above a set rpcTimeout", verify: d(3 * time.Minute), rpc: d(2 * time.Minute),
			err: `spec.verifyTimeout: Invalid value: "3m0s": must be below spec.rpcTimeout (2m0s)`},
		{name: "negative", verify: d(-time.Minute),
			err: `spec.verifyTimeout: Invalid value: "-1m0s": must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := platform()
			p.Spec.VerifyTimeout, p.Spec.RPCTimeout = tc.verify, tc.rpc
			errs := Validate(p)
			if tc.err == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Error()).To(ContainSubstring(tc.err))
		})
	}
}

// TestPipelineStagesHaveADisruptionBudget: every pipeline stage gets a PodDisruptionBudget selecting its pods that
// lets a drain evict one pod at a time (the evicted pod still drains its events within its grace period; a stage
// with several replicas keeps serving meanwhile), never zero (a one-replica stage must not block node drains).
// Pharos runs one replica with Recreate and has none.
func TestPipelineStagesHaveADisruptionBudget(t *testing.T) {
	p := platform()
	for _, stage := range Stages {
		t.Run(stage, func(t *testing.T) {
			g := NewWithT(t)
			pdb := PodDisruptionBudget(p, stage)
			if stage == gitopsv1alpha1.StagePharos {
				g.Expect(pdb).To(BeNil())
				return
			}
			g.Expect(pdb).NotTo(BeNil())
			g.Expect(pdb.Namespace).To(Equal(p.Namespace))
			g.Expect(pdb.Name).To(Equal(Name(stage)))
			g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(Deployment(p, stage).Spec.Selector.MatchLabels))
			g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
			g.Expect(pdb.Spec.MinAvailable).To(BeNil())
		})
	}
}
