package plan

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// effectivePort is the port a gNMIc prometheus output listens on: its listen key, else gNMIc's default :9804.
func effectivePort(g Gomega, cfg map[string]any) int32 {
	out, err := gnmicserver.DecodeOutput(cfg, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Unused).To(BeEmpty())
	listen, _ := out.Values["listen"].(string)
	if listen == "" {
		listen = ":9804"
	}
	var port int32
	_, err = fmt.Sscanf(listen[strings.LastIndex(listen, ":")+1:], "%d", &port)
	g.Expect(err).NotTo(HaveOccurred(), listen)
	return port
}

func TestPrometheusOutputsOfAClusterListenOnDistinctPorts(t *testing.T) {
	g := NewWithT(t)
	s := wireSnapshot()
	prom := func(name, config string) v1.Output {
		o := v1.Output{ObjectMeta: meta("lab", name, nil), Spec: v1.OutputSpec{Type: v1.OutputPrometheus}}
		if config != "" {
			o.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(config)}
		}
		return o
	}
	s.Outputs = []v1.Output{prom("a", ""), prom("b", ""), prom("c", `{"listen":":9804"}`), prom("d", `{"listen":"0.0.0.0:9900","path":"/m"}`),
		prom("e", `{"listen":":9900"}`)}
	s.Pipelines[0].Spec.Outputs.OutputRefs = []string{"a", "b", "c", "d", "e"}
	s.ReservedPorts = []int32{9805} // e.g. the Cluster's REST port
	req, _ := pushThroughGNMIc(g, s)
	ports := map[int32]string{}
	for name, cfg := range req.Outputs {
		port := effectivePort(g, cfg)
		g.Expect(ports).NotTo(HaveKey(port), "%s and %s both listen on %d", name, ports[port], port)
		g.Expect(port).NotTo(Equal(int32(9805)), "the reserved port")
		ports[port] = name
	}
	// A free port the user chose is kept, with the rest of the config; the first claimant of a port keeps it.
	g.Expect(req.Outputs["lab/c"]["listen"]).To(Equal(":9804"))
	g.Expect(req.Outputs["lab/d"]).To(HaveKeyWithValue("listen", "0.0.0.0:9900"))
	g.Expect(req.Outputs["lab/d"]).To(HaveKeyWithValue("path", "/m"))
	// And the plan tells the controller each instance's port, for its Service.
	p := Build(s)
	for _, po := range p.PrometheusOutputs {
		g.Expect(po.Port).To(Equal(effectivePort(g, p.Config.Outputs[po.Name])), po.Name)
	}
}
