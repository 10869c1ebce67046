package plugins

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// The reader must follow mapstructure's rules even where gNMIc's current plugins do not exercise them, so a
// future plugin using them is read right: a synthetic plugin package covers them.
const syntheticPlugin = `package demo

import "time"

const kind = "demo"

type base struct {
	Shared string ` + "`mapstructure:\"shared\"`" + `
}

type mode string

type config struct {
	base     ` + "`mapstructure:\",squash\"`" + `
	Address  string        ` + "`mapstructure:\"address,omitempty\"`" + `
	Mode     mode          ` + "`mapstructure:\"mode\"`" + `
	Every    time.Duration ` + "`mapstructure:\"every\"`" + `
	Names    []string      ` + "`mapstructure:\"names\"`" + `
	Untagged int
	Skipped  bool          ` + "`mapstructure:\"-\"`" + `
	hidden   string        ` + "`mapstructure:\"hidden\"`" + `
	Nested   *struct{ A int } ` + "`mapstructure:\"nested\"`" + `
}

type plugin struct{ cfg *config }

func init() { outputs.Register(kind, func() any { return &plugin{} }) }

func (p *plugin) Init(cfg map[string]any) error {
	newCfg := new(config)
	return outputs.DecodeConfig(cfg, newCfg)
}
`

func TestReaderFollowsMapstructureRules(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(root, "demo"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(root, "demo", "demo.go"), []byte(syntheticPlugin), 0o644)).To(Succeed())
	found, err := readPlugins(root, "outputs")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(Equal(map[string]Keys{"demo": {"shared": String, "address": String, "mode": String,
		"every": Duration, "names": StringList, "Untagged": Int, "nested": Object}}))
}
