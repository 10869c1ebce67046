package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/version"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// TestSamplesRunOnTheSampleCollectorImage: the sample Cluster's image must decode everything the gNMIc samples
// use, and the samples' plan must pass that version's decoder without a refused or dropped key.
func TestSamplesRunOnTheSampleCollectorImage(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob("../../../config/samples/gnmic_v1alpha1_*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	var cluster *v1.Cluster
	s := Snapshot{Profiles: map[ktypes.NamespacedName]*v1.TargetProfile{}, Credentials: map[ktypes.NamespacedName]map[string][]byte{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		var tm metav1.TypeMeta
		g.Expect(yaml.Unmarshal(data, &tm)).To(Succeed(), f)
		into := map[string]any{
			"Cluster": &v1.Cluster{}, "GnmicPipeline": &v1.GnmicPipeline{}, "Target": &v1.Target{}, "TargetProfile": &v1.TargetProfile{},
			"Subscription": &v1.Subscription{}, "Output": &v1.Output{}, "Input": &v1.Input{}, "Processor": &v1.Processor{},
			"TunnelTargetPolicy": &v1.TunnelTargetPolicy{}, "TargetSource": &v1.TargetSource{},
		}[tm.Kind]
		g.Expect(into).NotTo(BeNil(), "unknown kind in %s", f)
		g.Expect(yaml.UnmarshalStrict(data, into)).To(Succeed(), f)
		switch o := into.(type) {
		case *v1.Cluster:
			cluster = o
		case *v1.GnmicPipeline:
			s.Pipelines = append(s.Pipelines, *o)
		case *v1.Target:
			s.Targets = append(s.Targets, *o)
		case *v1.TargetProfile:
			s.Profiles[ktypes.NamespacedName{Name: o.Name}] = o
		case *v1.Subscription:
			s.Subscriptions = append(s.Subscriptions, *o)
		case *v1.Output:
			s.Outputs = append(s.Outputs, *o)
		case *v1.Input:
			s.Inputs = append(s.Inputs, *o)
		case *v1.Processor:
			s.Processors = append(s.Processors, *o)
		case *v1.TunnelTargetPolicy:
			s.TunnelTargetPolicies = append(s.TunnelTargetPolicies, *o)
		}
	}
	g.Expect(cluster).NotTo(BeNil())
	s.CollectorImage = cluster.Spec.Image
	ver, ok := version.FromImage(cluster.Spec.Image)
	g.Expect(ok).To(BeTrue(), "the sample image must name a collector version: %s", cluster.Spec.Image)
	if len(s.TunnelTargetPolicies) > 0 {
		g.Expect(version.Compare(cluster.Spec.Image, version.Feature{Name: "tunnel target policies", Since: version.TunnelTargetMatches})).
			To(BeEmpty(), "the samples include a TunnelTargetPolicy")
	}
	// Every sample Pipeline, with every sample tunnel policy added, resolves and passes the decoder.
	for i := range s.Pipelines {
		for _, tp := range s.TunnelTargetPolicies {
			s.Pipelines[i].Spec.TunnelTargetPolicyRefs = append(s.Pipelines[i].Spec.TunnelTargetPolicyRefs, tp.Name)
		}
	}
	p := Build(s)
	for name, res := range p.Pipelines {
		g.Expect(res.Missing).To(BeEmpty(), name)
		g.Expect(res.Unsupported).To(BeEmpty(), name)
		g.Expect(res.NoOutputs).To(BeFalse(), name)
	}
	body, _, err := Encode(p.ForPod(sortedKeys(p.Config.Targets)))
	g.Expect(err).NotTo(HaveOccurred())
	d, err := gnmicserver.DecodeApply(bytes.NewReader(body), ver.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Unused).To(BeEmpty())
	g.Expect(d.Request.TunnelTargetMatches).To(HaveLen(len(s.TunnelTargetPolicies)))
	g.Expect(strings.Join(sortedKeys(d.Request.Subscriptions), ",")).NotTo(BeEmpty())
}

func TestTunnelPoliciesAreRefusedBelowCollector047(t *testing.T) {
	for image, refused := range map[string]bool{
		"ghcr.io/openconfig/gnmic:0.45.0": true, "ghcr.io/openconfig/gnmic:v0.46.2": true,
		"ghcr.io/openconfig/gnmic:0.47.0": false, "ghcr.io/openconfig/gnmic:latest": false,
	} {
		g := NewWithT(t)
		s := wireSnapshot()
		s.CollectorImage = image
		p := Build(s)
		res := p.Pipelines["lab/pl"]
		if refused {
			g.Expect(p.Config.TunnelTargetMatches).To(BeEmpty(), image)
			g.Expect(res.Unsupported).To(ConsistOf(ContainSubstring("TunnelTargetPolicy/t: tunnel target policies need gNMIc 0.47 or later")), image)
			g.Expect(res.TunnelTargetPolicies).To(BeZero(), image)
		} else {
			g.Expect(p.Config.TunnelTargetMatches).To(HaveKey("lab/t"), image)
			g.Expect(res.Unsupported).To(BeEmpty(), image)
		}
	}
}
