package gnmic

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

// Which files a profile's targets use while its TLS material changes: new content is used once it has had the
// propagation time to reach the pods; meanwhile a rotated profile keeps its old files, and a profile with nothing
// usable is held back.
func TestChooseTargetTLS(t *testing.T) {
	const now, propagation = int64(1000), 2 * time.Minute
	profile := ktypes.NamespacedName{Namespace: "lab", Name: "p"}
	oldFiles := map[string]string{plan.TargetTLSCA: "lab_p_aaaa_ca.crt"}
	newFiles := map[string]string{plan.TargetTLSCA: "lab_p_bbbb_ca.crt"}
	previous := map[string]map[string]string{"lab/p": oldFiles}
	bothStored := map[string][]byte{"lab_p_aaaa_ca.crt": []byte("CA-1"), "lab_p_bbbb_ca.crt": []byte("CA-2")}
	for name, tc := range map[string]struct {
		wanted   map[string]string
		previous map[string]map[string]string
		stored   map[string][]byte
		added    map[string]int64
		use      map[string]string // nil: held back
		settle   time.Duration
	}{
		"with the Secret: in the pods from the start": {wanted: newFiles, added: map[string]int64{"lab_p_bbbb_ca.crt": 0},
			use: newFiles},
		"unchanged, added long ago": {wanted: oldFiles, previous: previous, stored: bothStored,
			added: map[string]int64{"lab_p_aaaa_ca.crt": now - 600}, use: oldFiles},
		"rotated just now: the old file stays in use": {wanted: newFiles, previous: previous, stored: bothStored,
			added: map[string]int64{"lab_p_bbbb_ca.crt": now - 30}, use: oldFiles, settle: 90 * time.Second},
		"rotated, propagated: the new file": {wanted: newFiles, previous: previous, stored: bothStored,
			added: map[string]int64{"lab_p_bbbb_ca.crt": now - 120}, use: newFiles},
		"rotated, but the old file is gone from the Secret": {wanted: newFiles, previous: previous,
			stored: map[string][]byte{"lab_p_bbbb_ca.crt": []byte("CA-2")}, added: map[string]int64{"lab_p_bbbb_ca.crt": now - 30},
			settle: 90 * time.Second},
		"a new file the profile never had": {wanted: map[string]string{plan.TargetTLSCA: "lab_p_bbbb_ca.crt",
			plan.TargetTLSCert: "lab_p_cccc_tls.crt"}, previous: previous, stored: bothStored,
			added: map[string]int64{"lab_p_bbbb_ca.crt": now - 600, "lab_p_cccc_tls.crt": now - 10}, settle: 110 * time.Second},
		"first time, just added": {wanted: newFiles, added: map[string]int64{"lab_p_bbbb_ca.crt": now - 1}, settle: 119 * time.Second},
		"written by a version without digests: its unversioned file stays in use": {wanted: newFiles,
			stored: map[string][]byte{"lab_p_ca.crt": []byte("CA-1"), "lab_p_bbbb_ca.crt": []byte("CA-1")},
			added:  map[string]int64{"lab_p_bbbb_ca.crt": now - 5},
			use:    map[string]string{plan.TargetTLSCA: "lab_p_ca.crt"}, settle: 115 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := chooseTargetTLS(plan.TargetTLSKeys{profile: tc.wanted}, tc.previous, tc.stored, tc.added, now, propagation)
			g.Expect(got.settle).To(Equal(tc.settle))
			if tc.use == nil {
				g.Expect(got.inUse).NotTo(HaveKey(profile))
				g.Expect(got.waiting).To(HaveKeyWithValue(profile, ContainSubstring("waiting up to 2m0s")))
				return
			}
			g.Expect(got.inUse).To(HaveKeyWithValue(profile, tc.use))
			g.Expect(got.waiting).To(BeEmpty())
		})
	}
}

func TestTargetTLSKeyFollowsTheContent(t *testing.T) {
	g := NewWithT(t)
	a := plan.TargetTLSKey("lab", "p", plan.TargetTLSCA, []byte("CA-1"))
	g.Expect(a).To(MatchRegexp(`^lab_p_[0-9a-f]{12}_ca\.crt$`))
	g.Expect(plan.TargetTLSKey("lab", "p", plan.TargetTLSCA, []byte("CA-1"))).To(Equal(a))
	g.Expect(plan.TargetTLSKey("lab", "p", plan.TargetTLSCA, []byte("CA-2"))).NotTo(Equal(a))
}
