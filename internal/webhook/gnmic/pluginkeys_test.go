package gnmic

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func TestConfigKeysThePluginLacksAreWarnedAbout(t *testing.T) {
	g := NewWithT(t)
	out := &gnmicv1alpha1.Output{Spec: gnmicv1alpha1.OutputSpec{Type: gnmicv1alpha1.OutputKafka,
		Config: &apiextensionsv1.JSON{Raw: []byte(`{"topic":"t","Max-Retry":2,"kafka-version":"3.6.0","addr":"bus:9092"}`)}}}
	warnings, err := outputValidator.ValidateCreate(context.Background(), out)
	g.Expect(err).NotTo(HaveOccurred(), "a warning, not a denial")
	g.Expect(warnings).To(HaveExactElements(
		"spec.config.addr: gNMIc's kafka output has no such setting (as of gNMIc v0.47.0) and ignores it"))

	proc := &gnmicv1alpha1.Processor{Spec: gnmicv1alpha1.ProcessorSpec{Type: "event-strings",
		Config: &apiextensionsv1.JSON{Raw: []byte(`{"value-names":["x"],"value-name":"y"}`)}}}
	warnings, err = processorValidator.ValidateUpdate(context.Background(), proc, proc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(warnings).To(HaveExactElements(ContainSubstring("spec.config.value-name: gNMIc's event-strings processor")))

	proc.Spec.Config.Raw = []byte(`{"value-names":["x"]}`)
	g.Expect(processorValidator.ValidateCreate(context.Background(), proc)).To(BeEmpty())
	proc.Spec.Type = "event-nope"
	_, err = processorValidator.ValidateCreate(context.Background(), proc)
	g.Expect(err).To(MatchError(ContainSubstring("spec.type")), "an unknown processor type stays a denial")
}
