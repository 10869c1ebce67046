package discovery

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestCRName(t *testing.T) {
	cases := []struct {
		raw, want string
	}{
		{"edge-collector-1", "edge-collector-1"},
		{"abc", "abc"},
		{"Edge_Collector.1", "edge-collector-1-" + hash5("Edge_Collector.1")},
		{"edge--1", "edge-1-" + hash5("edge--1")},
		{"-edge-", "edge-" + hash5("-edge-")},
		{"a/b~c", "a-b-c-" + hash5("a/b~c")},
		{"___", "c-" + hash5("___")},
		{"", "c-" + hash5("")},
		{"ÄÖÜ", "c-" + hash5("ÄÖÜ")},
		{strings.Repeat("a", 53), strings.Repeat("a", 53)},
		{strings.Repeat("a", 54), strings.Repeat("a", 53) + "-" + hash5(strings.Repeat("a", 54))},
		// A cut that ends on a dash does not leave it before the suffix.
		{strings.Repeat("a", 52) + "-bc", strings.Repeat("a", 52) + "-" + hash5(strings.Repeat("a", 52)+"-bc")},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			g := NewWithT(t)
			got := CollectorCRName(tc.raw)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(validation.IsDNS1123Label(got)).To(BeEmpty())
		})
	}
	NewWithT(t).Expect(PipelineCRName("---")).To(HavePrefix("p-"))
	// Values that sanitise alike still differ.
	NewWithT(t).Expect(CollectorCRName("Edge_1")).NotTo(Equal(CollectorCRName("edge-1")))
}

// hash5 is the suffix computed independently of CRName.
func hash5(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", sum)[:5]
}

func FuzzCRName(f *testing.F) {
	for _, s := range []string{"edge-1", "Edge_1", "", "___", "a/b", strings.Repeat("x", 80), "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := CollectorCRName(raw)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Fatalf("CollectorCRName(%q) = %q: %v", raw, got, errs)
		}
		if got != CollectorCRName(raw) {
			t.Fatalf("not deterministic for %q", raw)
		}
		// A name that is already valid and short enough is kept as is; anything else gets the hash suffix.
		if len(validation.IsDNS1123Label(raw)) == 0 && len(raw) <= MaxBaseLength && !strings.Contains(raw, "--") {
			if got != raw {
				t.Fatalf("valid %q was changed to %q", raw, got)
			}
		} else if got == raw {
			t.Fatalf("invalid %q was kept", raw)
		}
	})
}
