package plan

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Secret keys are at most 253 characters: a long TargetProfile name (up to 253 itself) still gives valid, distinct
// keys, so one profile cannot stop the target-tls Secret from being written (and with it every push).
func TestTargetTLSKeysAreLengthSafe(t *testing.T) {
	g := NewWithT(t)
	ns := strings.Repeat("n", 63)
	long1 := strings.Repeat("p", 252) + "1"
	long2 := strings.Repeat("p", 252) + "2"
	for _, file := range []string{TargetTLSCA, TargetTLSCert, TargetTLSPrivateKey} {
		k1, k2 := TargetTLSKey(ns, long1, file, []byte("PEM")), TargetTLSKey(ns, long2, file, []byte("PEM"))
		g.Expect(validation.IsConfigMapKey(k1)).To(BeEmpty(), k1)
		g.Expect(k1).NotTo(Equal(k2))
		g.Expect(k1).To(HaveSuffix("_" + file))
		g.Expect(TargetTLSKey(ns, long1, file, []byte("OTHER"))).NotTo(Equal(k1), "new content, new key")
		f1 := TargetTLSFile(ns, long1, file)
		g.Expect(validation.IsConfigMapKey(f1)).To(BeEmpty(), f1)
		g.Expect(f1).NotTo(Equal(TargetTLSFile(ns, long2, file)))
	}
	// Short names keep their readable form.
	g.Expect(TargetTLSKey("lab", "default", TargetTLSCA, []byte("CA"))).To(HavePrefix("lab_default_"))
}
