package plan

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plugins"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// Outputs and processors are decoded by gNMIc's plugins, each into its own config struct, after the collector
// stored the apply. These tests set every key of each plugin (from the key table checked against gNMIc's source
// in internal/gnmic/plugins) in the CRD's config, push it through the plan and encoder, and assert what the
// plugin holds.

// userConfig sets every key of keys whose kind has a plain JSON form, except those the operator writes itself,
// and returns the config and what the plugin must decode for each key.
func userConfig(keys plugins.Keys, operatorWritten ...string) (cfg map[string]any, want map[string]any) {
	cfg, want = map[string]any{}, map[string]any{}
	for key, kind := range keys {
		if slices.Contains(operatorWritten, key) {
			continue
		}
		switch kind {
		case plugins.String:
			cfg[key], want[key] = "v-"+key, "v-"+key
		case plugins.Int:
			cfg[key], want[key] = 7, int64(7)
		case plugins.Uint:
			cfg[key], want[key] = 7, uint64(7)
		case plugins.Float:
			cfg[key], want[key] = 1.5, 1.5
		case plugins.Bool:
			cfg[key], want[key] = true, true
		case plugins.Duration:
			cfg[key], want[key] = "7s", 7*time.Second
		case plugins.StringList:
			cfg[key], want[key] = []string{"v-" + key}, []string{"v-" + key}
		}
		// Objects, lists and types of other packages have no one plain value valid for every plugin: the
		// stand-in accepts them unchecked, so setting them here would prove nothing.
	}
	return cfg, want
}

func rawJSON(g Gomega, v any) *apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return &apiextensionsv1.JSON{Raw: b}
}

func TestEveryOutputTypeSurvivesItsPlugin(t *testing.T) {
	for _, typ := range v1.OutputTypes {
		t.Run(string(typ), func(t *testing.T) {
			g := NewWithT(t)
			keys, ok := plugins.Output(string(typ), true)
			g.Expect(ok).To(BeTrue())
			written := []string{"event-processors"}
			address := ""
			if key, _, ok := v1.OutputAddressKey(typ); ok {
				written = append(written, key)
				var err error
				address, err = ResolveServiceAddress(typ, "bus.lab.svc", 4222)
				g.Expect(err).NotTo(HaveOccurred())
			}
			if typ == v1.OutputPrometheus {
				written = append(written, "listen")
			}
			cfg, want := userConfig(keys, written...)
			g.Expect(len(want)).To(BeNumerically(">=", 5), "too few keys set to prove anything")
			if typ == v1.OutputFile {
				// A relative filename is placed under the writable data volume (TestFileOutputsWriteUnderTheDataVolume).
				cfg["filename"], want["filename"] = "/abs/v-filename", "/abs/v-filename"
			}

			s := wireSnapshot()
			s.Outputs[0].Spec = v1.OutputSpec{Type: typ, Config: rawJSON(g, cfg)}
			if address != "" {
				s.Outputs[0].Spec.ServiceRef = &v1.OutputServiceRef{Name: "bus", Port: "4222"}
				s.OutputAddresses = map[ktypes.NamespacedName]string{{Namespace: "lab", Name: "o"}: address}
			}
			g.Expect(v1.ValidateOutput(&s.Outputs[0])).To(BeEmpty(), "the webhook admits the Output")
			s.Processors = []v1.Processor{{ObjectMeta: meta("lab", "proc", nil), Spec: v1.ProcessorSpec{Type: "event-drop"}}}
			s.Pipelines[0].Spec.Outputs.ProcessorRefs = []string{"proc"}

			d := decodeAsGNMIc(g, Build(s))
			g.Expect(d.Outputs).To(HaveKey("lab/o"))
			got := d.Outputs["lab/o"]
			g.Expect(got.Type).To(Equal(string(typ)))
			for key, value := range want {
				g.Expect(got.Values).To(HaveKeyWithValue(key, value), "spec.config.%s", key)
			}
			g.Expect(got.Values).To(HaveKeyWithValue("event-processors", []string{"lab/proc"}))
			if address != "" {
				key, _, _ := v1.OutputAddressKey(typ)
				g.Expect(got.Values).To(HaveKeyWithValue(key, address))
			}
			if typ == v1.OutputPrometheus {
				g.Expect(got.Values).To(HaveKeyWithValue("listen", ":9804"), "the operator assigns every prometheus output its port")
			}
		})
	}
}

func TestEveryProcessorTypeSurvivesItsPlugin(t *testing.T) {
	for _, typ := range plugins.ProcessorTypes(true) {
		t.Run(typ, func(t *testing.T) {
			g := NewWithT(t)
			keys, _ := plugins.Processor(typ, true)
			cfg, want := userConfig(keys)
			g.Expect(want).NotTo(BeEmpty(), "no key of %s set", typ)

			s := wireSnapshot()
			s.Processors = []v1.Processor{{ObjectMeta: meta("lab", "proc", nil), Spec: v1.ProcessorSpec{Type: typ, Config: rawJSON(g, cfg)}}}
			g.Expect(v1.ValidateProcessor(&s.Processors[0])).To(BeEmpty(), "the webhook admits the Processor")
			s.Pipelines[0].Spec.Outputs.ProcessorRefs = []string{"proc"}

			d := decodeAsGNMIc(g, Build(s))
			g.Expect(d.Processors).To(HaveKey("lab/proc"))
			got := d.Processors["lab/proc"]
			g.Expect(got.Type).To(Equal(typ))
			g.Expect(got.Values).To(Equal(want))
			g.Expect(d.Outputs["lab/o"].Values).To(HaveKeyWithValue("event-processors", []string{"lab/proc"}))
		})
	}
}

func TestAKeyTheOutputPluginLacksIsCaught(t *testing.T) {
	// The negative cases of the tests above: a key kafka lacks and a mistyped value get through the plan; gNMIc would
	// ignore the first and fail to start the output for the second.
	for cfg, check := range map[string]func(g Gomega, d *gnmicserver.Decoded){
		`{"topic":"t","addr":"bus:9092"}`: func(g Gomega, d *gnmicserver.Decoded) {
			g.Expect(d.Unused).To(ConsistOf("outputs[lab/o].addr"))
			g.Expect(d.PluginErrors).To(BeEmpty())
		},
		`{"topic":"t","max-retry":"3"}`: func(g Gomega, d *gnmicserver.Decoded) {
			g.Expect(d.PluginErrors).To(ConsistOf(ContainSubstring(`'max-retry' expected type 'int64', got unconvertible type 'string'`)))
		},
	} {
		g := NewWithT(t)
		s := wireSnapshot()
		s.Outputs[0].Spec = v1.OutputSpec{Type: v1.OutputKafka, Config: &apiextensionsv1.JSON{Raw: []byte(cfg)}}
		body, _, err := Encode(Build(s).ForPod([]string{"lab/r1"}))
		g.Expect(err).NotTo(HaveOccurred())
		d, err := gnmicserver.DecodeApply(bytes.NewReader(body), "")
		g.Expect(err).NotTo(HaveOccurred())
		check(g, d)
	}
}
