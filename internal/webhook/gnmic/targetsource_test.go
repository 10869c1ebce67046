package gnmic

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
)

func httpTS(mut func(*gnmicv1alpha1.HTTPSource)) *gnmicv1alpha1.TargetSource {
	h := &gnmicv1alpha1.HTTPSource{URL: "https://inv.example.com/api", Method: "GET",
		Mapping: &gnmicv1alpha1.Mapping{Items: "self.results", Name: "item.hostname", Address: "item.ip"}}
	if mut != nil {
		mut(h)
	}
	return &gnmicv1alpha1.TargetSource{Spec: gnmicv1alpha1.TargetSourceSpec{
		Source: gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: h}}}
}

func TestValidateTargetSource(t *testing.T) {
	mapper, err := targetsource.NewMapper()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for name, tc := range map[string]struct {
		ts   *gnmicv1alpha1.TargetSource
		want string // substring of the first error; "" = valid
	}{
		"valid":            {httpTS(nil), ""},
		"bad cel":          {httpTS(func(h *gnmicv1alpha1.HTTPSource) { h.Mapping.Address = "item.ip +" }), "spec.source.http.mapping.address"},
		"unknown function": {httpTS(func(h *gnmicv1alpha1.HTTPSource) { h.Mapping.Name = "nope(item)" }), "spec.source.http.mapping.name"},
		"body with GET":    {httpTS(func(h *gnmicv1alpha1.HTTPSource) { h.Body = "x" }), "spec.source.http.body"},
		"body with POST":   {httpTS(func(h *gnmicv1alpha1.HTTPSource) { h.Body, h.Method = "x", "POST" }), ""},
		"requestParam alone": {httpTS(func(h *gnmicv1alpha1.HTTPSource) {
			h.Pagination = &gnmicv1alpha1.Pagination{RequestParam: "cursor"}
		}), "spec.source.http.pagination.nextField"},
		"relative url": {httpTS(func(h *gnmicv1alpha1.HTTPSource) { h.URL = "/devices" }), "spec.source.http.url"},
		"two auths": {httpTS(func(h *gnmicv1alpha1.HTTPSource) {
			h.Auth = &gnmicv1alpha1.HTTPAuth{Basic: &gnmicv1alpha1.BasicAuth{}, Token: &gnmicv1alpha1.TokenAuth{}}
		}), "spec.source.http.auth"},
		"type mismatch": {&gnmicv1alpha1.TargetSource{Spec: gnmicv1alpha1.TargetSourceSpec{Source: gnmicv1alpha1.InventorySource{
			Type: "Static", HTTP: &gnmicv1alpha1.HTTPSource{URL: "http://x"}}}}, "spec.source.http"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidateTargetSource(tc.ts, mapper)
			if tc.want == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).NotTo(BeEmpty())
			g.Expect(errs.ToAggregate().Error()).To(ContainSubstring(tc.want))
		})
	}
}

func FuzzValidateTargetSource(f *testing.F) {
	mapper, err := targetsource.NewMapper()
	if err != nil {
		f.Fatal(err)
	}
	f.Add("https://inv/api", "self.results", "item.hostname", "POST", "{}", "cursor")
	f.Add("ftp://x", "self.(", "", "GET", "", "")
	f.Add("", "[1,2].map(x, x*2)", "item.?name.orValue('x')", "", "", "p")
	f.Fuzz(func(t *testing.T, url, items, name, method, body, param string) {
		ts := httpTS(func(h *gnmicv1alpha1.HTTPSource) {
			h.URL, h.Mapping.Items, h.Mapping.Name, h.Method, h.Body = url, items, name, method, body
			h.Pagination = &gnmicv1alpha1.Pagination{RequestParam: param}
		})
		for _, e := range ValidateTargetSource(ts, mapper) {
			if !strings.HasPrefix(e.Field, "spec.") {
				t.Fatalf("error without a field path: %v", e)
			}
		}
	})
}
