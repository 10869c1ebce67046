package quota

import (
	"os"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

var ledgerPattern = regexp.MustCompile(LedgerPattern)

func TestParseLedger(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.Unix(sec, 0).Rfc3339Copy() }
	for name, tc := range map[string]struct {
		in      string
		want    []agentraxv1alpha1.Reservation
		wantErr string
	}{
		"empty":                          {in: ""},
		"one":                            {in: "a=3/6@1764601800", want: []agentraxv1alpha1.Reservation{{Name: "a", Replicas: 3, GPUs: 6, ReservedAt: at(1764601800)}}},
		"sorted":                         {in: "b.x=1/0@5,a-1=2/0@7", want: []agentraxv1alpha1.Reservation{{Name: "a-1", Replicas: 2, ReservedAt: at(7)}, {Name: "b.x", Replicas: 1, ReservedAt: at(5)}}},
		"dup":                            {in: "a=1/0@1,a=2/0@1", wantErr: `"a" is reserved twice`},
		"no name":                        {in: "=1/0@1", wantErr: "empty name"},
		"upper":                          {in: "A=1/0@1", wantErr: "only lowercase"},
		"dash":                           {in: "-a=1/0@1", wantErr: "only lowercase"},
		"no =":                           {in: "a", wantErr: "name=replicas/gpus@unixSeconds"},
		"no /":                           {in: "a=1@1", wantErr: `missing "/"`},
		"no @":                           {in: "a=1/0", wantErr: `missing "@"`},
		"neg":                            {in: "a=-1/0@1", wantErr: "replicas"},
		"int32":                          {in: "a=2147483648/0@1", wantErr: "replicas"},
		"gpus":                           {in: "a=1/x@1", wantErr: "gpus"},
		"time":                           {in: "a=1/0@99999999999999", wantErr: "reservation time"},
		"empty entry names its position": {in: "a=1/0@1,", wantErr: "entry 2"},
		"block of an earlier version":    {in: "a=1/0@1,~h0=8:8/4@9", wantErr: "only lowercase"},
		"agents on a name":               {in: "a=1:1/0@1", wantErr: "replicas"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseLedger(tc.in)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(HaveLen(len(tc.want)))
			for i := range got {
				g.Expect(got[i].Name).To(Equal(tc.want[i].Name))
				g.Expect(got[i].Replicas).To(Equal(tc.want[i].Replicas))
				g.Expect(got[i].GPUs).To(Equal(tc.want[i].GPUs))
				g.Expect(got[i].ReservedAt.Equal(&tc.want[i].ReservedAt)).To(BeTrue())
			}
			g.Expect(ledgerPattern.MatchString(tc.in)).To(BeTrue(), "what parses also passes the schema")
		})
	}
}

func TestFormatLedger(t *testing.T) {
	g := NewWithT(t)
	g.Expect(FormatLedger(nil)).To(BeEmpty())
	ledger := []agentraxv1alpha1.Reservation{
		{Name: "b", Replicas: 10, GPUs: 20, ReservedAt: metav1.Unix(1764601800, 0)},
		{Name: "a", Replicas: 1, ReservedAt: metav1.Unix(1764601801, 999)},
	}
	s := FormatLedger(ledger)
	g.Expect(s).To(Equal("a=1/0@1764601801,b=10/20@1764601800"))
	g.Expect(ledger[0].Name).To(Equal("b"), "the input is not reordered")
	g.Expect(ledgerPattern.MatchString(s)).To(BeTrue())
	back, err := ParseLedger(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(FormatLedger(back)).To(Equal(s))
	g.Expect(LedgerUsage(back, "")).To(Equal(Usage{Agents: 2, Replicas: 11, GPUs: 20}))
}

// FuzzLedger: any string either fails to parse or parses into a ledger that formats back to a canonical string
// which the schema pattern accepts and which parses to the same ledger; the parser never accepts what the
// schema would refuse.
func FuzzLedger(f *testing.F) {
	for _, s := range []string{"", "a=1/0@1", "b=2/4@1764601800,a=1/0@1", "a=1/0@1,a=1/0@1", "a=1/0", "x.y-z=0/0@0", "a=1/0@1,~h0=8:8/4@9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ledger, err := ParseLedger(s)
		if err != nil {
			return
		}
		if !ledgerPattern.MatchString(s) {
			t.Fatalf("%q parses but the schema refuses it", s)
		}
		canonical := FormatLedger(ledger)
		if !ledgerPattern.MatchString(canonical) {
			t.Fatalf("%q formats to %q, which the schema refuses", s, canonical)
		}
		again, err := ParseLedger(canonical)
		if err != nil {
			t.Fatalf("%q formats to %q, which does not parse: %v", s, canonical, err)
		}
		if FormatLedger(again) != canonical || len(again) != len(ledger) {
			t.Fatalf("%q: round trip changed %q", s, canonical)
		}
	})
}

// TestLedgerPatternIsTheCRDs: the API server enforces the same pattern the parser is fuzzed against.
func TestLedgerPatternIsTheCRDs(t *testing.T) {
	g := NewWithT(t)
	crd, err := os.ReadFile("../../../config/crd/bases/agentrax.io_tenantquotas.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(crd)).To(ContainSubstring("pattern: " + LedgerPattern + "\n"))
}
