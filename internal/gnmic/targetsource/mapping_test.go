package targetsource

import (
	"testing"

	. "github.com/onsi/gomega"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func mustParse(t *testing.T, s string) any {
	t.Helper()
	doc, err := ParseDocument([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestParseDocument(t *testing.T) {
	g := NewWithT(t)
	g.Expect(mustParse(t, `{"a":[1,"x"]}`)).To(Equal(map[string]any{"a": []any{float64(1), "x"}}))
	g.Expect(mustParse(t, "a:\n- 1\n- x\n")).To(Equal(map[string]any{"a": []any{float64(1), "x"}}))
	_, err := ParseDocument([]byte("  "))
	g.Expect(err).To(HaveOccurred())
	_, err = ParseDocument([]byte("a: [unclosed"))
	g.Expect(err).To(HaveOccurred())
}

func TestMapNativeFormat(t *testing.T) {
	g := NewWithT(t)
	m, err := NewMapper()
	g.Expect(err).NotTo(HaveOccurred())
	doc := mustParse(t, `[
	  {"name":"r1","address":"10.0.0.1","port":"6030","labels":{"site":"ams","rack":12,"up":true}},
	  {"name":"r2","address":"10.0.0.2","port":0},
	  "not an object",
	  {"address":"10.0.0.3"},
	  {"name":"r4"},
	  {"name":"r5","address":"h","port":"x"},
	  {"name":"r6","address":"h","port":70000},
	  {"name":"r7","address":"h","profile":3},
	  {"name":"r8","address":"h","labels":{"a":{"b":1}}},
	  {"name":"r9","address":"h","port":1.5}
	]`)
	res, err := m.Map(doc, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Devices).To(Equal([]Device{
		{Name: "r1", Address: "10.0.0.1", Port: 6030, Labels: map[string]string{"site": "ams", "rack": "12", "up": "true"}},
		{Name: "r2", Address: "10.0.0.2"},
	}))
	g.Expect(res.Failures).To(Equal([]Failure{
		{Reason: ReasonNotAnObject}, {Reason: ReasonMissingName}, {Name: "r4", Reason: ReasonMissingAddress},
		{Name: "r5", Reason: ReasonInvalidPort}, {Name: "r6", Reason: ReasonInvalidPort},
		{Name: "r7", Reason: ReasonInvalidProfile}, {Name: "r8", Reason: ReasonInvalidLabels},
		{Name: "r9", Reason: ReasonInvalidPort},
	}))
	_, err = m.Map(mustParse(t, `{"a":1}`), nil)
	g.Expect(err).To(MatchError(ContainSubstring("not a list")))
}

func TestMapCEL(t *testing.T) {
	g := NewWithT(t)
	m, err := NewMapper()
	g.Expect(err).NotTo(HaveOccurred())
	doc := mustParse(t, `{"site":"AMS","results":[
	  {"hostname":"Core-1","mgmt_ip":"10.0.0.1/24","tags":["spine","ams"]},
	  {"hostname":"core-2","mgmt_ip":"10.0.0.2/24","tags":[]},
	  {"hostname":"edge","tags":[]}
	]}`)
	mp := &gnmicv1alpha1.Mapping{
		Items:   "self.results.filter(d, d.hostname != 'ignored')",
		Name:    "item.hostname.lowerAscii()",
		Address: "item.mgmt_ip.split('/')[0]",
		Port:    "cel.bind(p, 6030, p)",
		Labels:  `{"site": self.site, "role": item.tags.size() > 0 ? item.tags[0] : "none", "n": string(math.greatest([1, 2]))}`,
	}
	res, err := m.Map(doc, mp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Devices).To(Equal([]Device{
		{Name: "core-1", Address: "10.0.0.1", Port: 6030, Labels: map[string]string{"site": "AMS", "role": "spine", "n": "2"}},
		{Name: "core-2", Address: "10.0.0.2", Port: 6030, Labels: map[string]string{"site": "AMS", "role": "none", "n": "2"}},
	}))
	g.Expect(res.Failures).To(Equal([]Failure{{Name: "edge", Reason: MappingErrorReason("address")}}))
	g.Expect(m.CachedPrograms()).To(Equal(5))
	_, err = m.Map(doc, mp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.CachedPrograms()).To(Equal(5), "programs are compiled once")

	// Optional types, sets and regex.
	mp = &gnmicv1alpha1.Mapping{Items: "self.results", Name: "item.hostname", Address: "item.?mgmt_ip.orValue('192.0.2.1')",
		Profile: "sets.contains(item.tags, ['spine']) ? 'spine' : 'leaf'", Port: "item.hostname.matches('^[Cc]ore') ? '57401' : ''"}
	res, err = m.Map(doc, mp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Devices).To(HaveLen(3))
	g.Expect(res.Devices[0]).To(Equal(Device{Name: "Core-1", Address: "10.0.0.1/24", Port: 57401, Profile: "spine"}))
	g.Expect(res.Devices[2]).To(Equal(Device{Name: "edge", Address: "192.0.2.1", Profile: "leaf"}))

	// onError: Fail turns the first bad device into an error.
	_, err = m.Map(doc, &gnmicv1alpha1.Mapping{Items: "self.results", Name: "item.hostname", Address: "item.mgmt_ip", OnError: "Fail"})
	g.Expect(err).To(MatchError(ErrDeviceFailed))

	g.Expect(m.CheckMapping(&gnmicv1alpha1.Mapping{Name: "item.", Address: "item.a"})).To(HaveKey("name"))
	_, err = m.Map(doc, &gnmicv1alpha1.Mapping{Items: "self.nope"})
	g.Expect(err).To(MatchError(ContainSubstring("mapping.items")))
}

func FuzzMap(f *testing.F) {
	m, err := NewMapper()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`[{"name":"a","address":"h","port":1}]`, "", "")
	f.Add(`{"results":[{"hostname":"a","ip":"h"}]}`, "self.results", "item.hostname")
	f.Add(`- name: x\n  address: y\n  labels: {a: b}`, "", "item.name + 'x'")
	f.Fuzz(func(t *testing.T, doc, items, name string) {
		parsed, err := ParseDocument([]byte(doc))
		if err != nil {
			return
		}
		res, err := m.Map(parsed, &gnmicv1alpha1.Mapping{Items: items, Name: name})
		if err != nil {
			return
		}
		for _, d := range res.Devices {
			if d.Name == "" || d.Address == "" || d.Port < 0 || d.Port > 65535 {
				t.Fatalf("invalid device %+v", d)
			}
		}
		BuildPlan(Template{Source: "fz", Profile: "p"}, res.Devices)
	})
}
