package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv/services"
)

// gnmicSource returns the root of a gNMIc source tree and its release. By default that is SourceVersion from the
// module cache (downloaded through the module proxy when missing). GNMIC_SOURCE_DIR and GNMIC_SOURCE_VERSION
// point the test at another tree instead, e.g. an exported snapshot of CurrentVersion, for the check by hand.
func gnmicSource(t *testing.T) (dir, version string) {
	t.Helper()
	if dir := os.Getenv("GNMIC_SOURCE_DIR"); dir != "" {
		version := os.Getenv("GNMIC_SOURCE_VERSION")
		if version != SourceVersion && version != CurrentVersion {
			t.Fatalf("GNMIC_SOURCE_VERSION must be %s or %s, the releases the tables describe", SourceVersion, CurrentVersion)
		}
		return dir, version
	}
	mod := "github.com/openconfig/gnmic@" + SourceVersion
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	// Outside this module, so the download cannot touch go.mod or go.sum.
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// go mod download reports a failed download in its JSON and exits 1; the JSON says why.
	var info struct{ Dir, Error string }
	jsonErr := json.Unmarshal(out, &info)
	switch {
	case info.Error != "":
		err = errors.New(info.Error)
	case err != nil:
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	case jsonErr != nil:
		err = jsonErr
	default:
		_, err = os.Stat(filepath.Join(info.Dir, "pkg", "outputs"))
	}
	if err != nil {
		services.Missing(t, "the gNMIc "+SourceVersion+" source (go mod download "+mod+")", err)
	}
	return info.Dir, SourceVersion
}

// TestTablesMatchGNMIcSource reads every output plugin and event processor of gNMIc's source and fails when the
// committed tables differ from their config structs: a key added, dropped or retyped by gNMIc, or a processor
// type gained or lost.
func TestTablesMatchGNMIcSource(t *testing.T) {
	g := NewWithT(t)
	dir, version := gnmicSource(t)
	current := version == CurrentVersion
	outputs, err := readPlugins(filepath.Join(dir, "pkg", "outputs"), "outputs")
	g.Expect(err).NotTo(HaveOccurred())
	processors, err := readPlugins(filepath.Join(dir, "pkg", "formatters"), "formatters")
	g.Expect(err).NotTo(HaveOccurred())
	// A reader that found nothing would make every comparison below vacuous.
	g.Expect(len(outputs)).To(BeNumerically(">=", len(v1.OutputTypes)))
	g.Expect(len(processors)).To(BeNumerically(">=", 20))

	var diffs []string
	for _, typ := range v1.OutputTypes {
		want, _ := Output(string(typ), current)
		diffs = append(diffs, diffKeys("output "+string(typ), want, outputs[string(typ)])...)
	}
	types := slices.Sorted(maps.Keys(processors))
	g.Expect(ProcessorTypes(current)).To(Equal(types), "the event processors gNMIc %s registers", version)
	for _, typ := range types {
		want, _ := Processor(typ, current)
		diffs = append(diffs, diffKeys("processor "+typ, want, processors[typ])...)
	}
	g.Expect(diffs).To(BeEmpty(), "the committed tables differ from gNMIc %s's config structs", version)
}

// diffKeys describes how the table's keys for one plugin differ from the source's.
func diffKeys(plugin string, table, source Keys) []string {
	var out []string
	if source == nil {
		return []string{plugin + ": not found in the source"}
	}
	for key, kind := range source {
		if tk, ok := table[key]; !ok || tk != kind {
			out = append(out, fmt.Sprintf("%s: source has %s (%s), table has %q", plugin, key, kind, tk))
		}
	}
	for key := range table {
		if _, ok := source[key]; !ok {
			out = append(out, fmt.Sprintf("%s: table has %s, the source does not", plugin, key))
		}
	}
	slices.Sort(out)
	return out
}

func TestTablesCoverEveryTypeTheCRDsOffer(t *testing.T) {
	g := NewWithT(t)
	var offered []string
	for _, typ := range v1.OutputTypes {
		offered = append(offered, string(typ))
	}
	g.Expect(slices.Collect(maps.Keys(outputs037))).To(ConsistOf(offered))
	for typ := range outputsAdded047 {
		g.Expect(outputs037).To(HaveKey(typ), "a v0.47 output type without a v0.37 entry")
	}
	g.Expect(ProcessorTypes(true)).To(ConsistOf(v1.ProcessorTypes), "the Processor webhook admits exactly these")
}

func TestHackToolsBuildTheSourceVersion(t *testing.T) {
	mod, err := os.ReadFile("../../../hack/tools/gnmic/go.mod")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(string(mod)).To(ContainSubstring("github.com/openconfig/gnmic "+SourceVersion+" "),
		"test/gnmicreal runs the gNMIc release the tables are checked against")
}

func TestKeysMatchCaseInsensitivelyAsMapstructureDoes(t *testing.T) {
	g := NewWithT(t)
	keys, ok := Output("kafka", true)
	g.Expect(ok).To(BeTrue())
	g.Expect(keys.Unknown(map[string]any{"Topic": "x", "topic-prefix": "y", "addr": "z", "kafka-version": "3"})).
		To(Equal([]string{"addr"}))
	old, _ := Output("kafka", false)
	g.Expect(old.Unknown(map[string]any{"kafka-version": "3"})).To(Equal([]string{"kafka-version"}))
	_, ok = Processor("event-time-epoch", false)
	g.Expect(ok).To(BeFalse(), "event-time-epoch came after v0.37.0")
}
