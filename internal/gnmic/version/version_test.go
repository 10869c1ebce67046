package version

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestFromImage(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/openconfig/gnmic:0.47.0":                    "0.47.0",
		"ghcr.io/openconfig/gnmic:v0.45.1":                   "0.45.1",
		"registry.local:5000/gnmic:v0.46.0-rc1":              "0.46.0",
		"registry.local:5000/gnmic:0.47.0@sha256:0123456789": "0.47.0",
		"gnmic:0.48":                                 "0.48.0",
		"registry.local:5000/gnmic":                  "",
		"ghcr.io/openconfig/gnmic:latest":            "",
		"ghcr.io/openconfig/gnmic@sha256:0123456789": "",
		"gnmic:1.x":                                  "",
	} {
		v, ok := FromImage(image)
		if want == "" {
			NewWithT(t).Expect(ok).To(BeFalse(), image)
			continue
		}
		NewWithT(t).Expect(ok).To(BeTrue(), image)
		NewWithT(t).Expect(v.String()).To(Equal(want), image)
	}
}

func TestCompare(t *testing.T) {
	tunnel := Feature{Name: "tunnel target policies", Since: TunnelTargetMatches}
	for image, refused := range map[string]bool{
		"ghcr.io/openconfig/gnmic:0.45.0": true,
		"ghcr.io/openconfig/gnmic:0.46.9": true,
		"ghcr.io/openconfig/gnmic:0.47.0": false,
		"ghcr.io/openconfig/gnmic:1.0.0":  false,
		"ghcr.io/openconfig/gnmic:latest": false,
	} {
		msg := Compare(image, tunnel)
		if refused {
			NewWithT(t).Expect(msg).To(ContainSubstring("need gNMIc 0.47 or later"), image)
		} else {
			NewWithT(t).Expect(msg).To(BeEmpty(), image)
		}
	}
}

// FuzzFromImage: any image string parses or is refused, never panics, and a parsed version prints back to a
// version that parses to itself.
func FuzzFromImage(f *testing.F) {
	for _, s := range []string{"gnmic:0.47.0", "a/b:v1.2.3-rc1@sha256:x", "gnmic", ":", "a:b:c", "x/y:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		v, ok := FromImage(image)
		if !ok {
			return
		}
		back, err := Parse(v.String())
		if err != nil || back != v {
			t.Fatalf("%q -> %v -> %v, %v", image, v, back, err)
		}
	})
}
