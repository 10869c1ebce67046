package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// The collectors' root filesystem is read-only: a file output with a relative filename writes under the writable
// OutputDataDir volume; absolute paths and stdout/stderr are left as they are.
func TestFileOutputsWriteUnderTheDataVolume(t *testing.T) {
	g := NewWithT(t)
	s := wireSnapshot()
	file := func(name, config string) v1.Output {
		return v1.Output{ObjectMeta: meta("lab", name, nil), Spec: v1.OutputSpec{Type: v1.OutputFile,
			Config: &apiextensionsv1.JSON{Raw: []byte(config)}}}
	}
	s.Outputs = []v1.Output{file("rel", `{"filename":"events.json"}`), file("abs", `{"filename":"/var/lib/gnmic/x/y.json"}`),
		file("std", `{"file-type":"stdout"}`)}
	s.Pipelines[0].Spec.Outputs.OutputRefs = []string{"rel", "abs", "std"}
	req, _ := pushThroughGNMIc(g, s)
	g.Expect(req.Outputs["lab/rel"]["filename"]).To(Equal(OutputDataDir + "/events.json"))
	g.Expect(req.Outputs["lab/abs"]["filename"]).To(Equal("/var/lib/gnmic/x/y.json"))
	g.Expect(req.Outputs["lab/std"]).NotTo(HaveKey("filename"))
}
