package attributes

import (
	"testing"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestPaths(t *testing.T) {
	for key, want := range map[string]string{
		"team":     "/remote_attributes/team",
		"a/b":      "/remote_attributes/a~1b",
		"a~b":      "/remote_attributes/a~0b",
		"~/":       "/remote_attributes/~0~1",
		"~1":       "/remote_attributes/~01",
		"dc.rack":  "/remote_attributes/dc.rack",
		"ü space":  "/remote_attributes/ü space",
		"/leading": "/remote_attributes/~1leading",
	} {
		t.Run(key, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Path(key)).To(Equal(want))
			back, err := ParsePath(want)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(Equal(key))
		})
	}
	for _, bad := range []string{"/remote_attributes/a/b", "/remote_attributes/a~2", "/remote_attributes/a~", "/attributes/a", "/remote_attributes/", "remoteAttributes.a"} {
		_, err := ParsePath(bad)
		NewWithT(t).Expect(err).To(HaveOccurred(), bad)
	}
}

func FuzzPathRoundTrip(f *testing.F) {
	for _, s := range []string{"a", "a/b", "~", "~0", "~1/~", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		back, err := ParsePath(Path(key))
		if key == "" {
			if err == nil {
				t.Fatal("empty key accepted")
			}
			return
		}
		if err != nil || back != key {
			t.Fatalf("round trip of %q: %q, %v", key, back, err)
		}
	})
}

func TestResolvePrecedence(t *testing.T) {
	const (
		sync   = fleetv1alpha1.OwnerExternalAttributeSync
		col    = fleetv1alpha1.OwnerCollector
		policy = fleetv1alpha1.OwnerRemoteAttributePolicy
	)
	for name, tc := range map[string]struct {
		claims []Claim
		want   map[string]string
		owner  map[string]string // key -> ownerName
	}{
		"nothing": {nil, nil, nil},
		"spec only": {
			[]Claim{{Kind: col, Name: "ns/c", Attributes: map[string]string{"env": "prod"}}},
			map[string]string{"env": "prod"}, map[string]string{"env": "ns/c"}},
		"spec beats policy": {
			[]Claim{{Kind: policy, Name: "ns/p", Priority: 100, Attributes: map[string]string{"env": "dev", "team": "a"}},
				{Kind: col, Name: "ns/c", Attributes: map[string]string{"env": "prod"}}},
			map[string]string{"env": "prod", "team": "a"}, map[string]string{"env": "ns/c", "team": "ns/p"}},
		"sync beats spec": {
			[]Claim{{Kind: col, Name: "ns/c", Attributes: map[string]string{"env": "prod"}},
				{Kind: sync, Name: "ns/s", Attributes: map[string]string{"env": "cmdb"}}},
			map[string]string{"env": "cmdb"}, map[string]string{"env": "ns/s"}},
		"truncated sync ignored": {
			[]Claim{{Kind: col, Name: "ns/c", Attributes: map[string]string{"env": "prod"}},
				{Kind: sync, Name: "ns/s", Truncated: true, Attributes: map[string]string{"env": "cmdb"}}},
			map[string]string{"env": "prod"}, map[string]string{"env": "ns/c"}},
		"higher policy priority wins": {
			[]Claim{{Kind: policy, Name: "a/low", Priority: 1, Attributes: map[string]string{"env": "low"}},
				{Kind: policy, Name: "z/high", Priority: 5, Attributes: map[string]string{"env": "high"}}},
			map[string]string{"env": "high"}, map[string]string{"env": "z/high"}},
		"policy tie by name": {
			[]Claim{{Kind: policy, Name: "b/p", Attributes: map[string]string{"env": "b"}},
				{Kind: policy, Name: "a/p", Attributes: map[string]string{"env": "a"}}},
			map[string]string{"env": "a"}, map[string]string{"env": "a/p"}},
		"first sync by name wins": {
			[]Claim{{Kind: sync, Name: "ns/z", Attributes: map[string]string{"env": "z"}},
				{Kind: sync, Name: "ns/a", Attributes: map[string]string{"env": "a"}}},
			map[string]string{"env": "a"}, map[string]string{"env": "ns/a"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, owners := Resolve(tc.claims)
			g.Expect(got).To(Equal(tc.want))
			gotOwners := map[string]string{}
			for _, o := range owners {
				gotOwners[o.Key] = o.OwnerName
				g.Expect(o.Value).To(Equal(tc.want[o.Key]))
			}
			if tc.owner == nil {
				g.Expect(owners).To(BeEmpty())
			} else {
				g.Expect(gotOwners).To(Equal(tc.owner))
			}
		})
	}
}

func TestDiff(t *testing.T) {
	owned := func(keys ...string) []fleetv1alpha1.AttributeOwner {
		var out []fleetv1alpha1.AttributeOwner
		for _, k := range keys {
			out = append(out, fleetv1alpha1.AttributeOwner{Key: k, OwnerKind: fleetv1alpha1.OwnerCollector, OwnerName: "ns/c"})
		}
		return out
	}
	type op struct{ Op, Path, Value string }
	for name, tc := range map[string]struct {
		desired  map[string]string
		previous []fleetv1alpha1.AttributeOwner
		remote   map[string]string
		want     []op
	}{
		"in sync": {map[string]string{"a": "1"}, owned("a"), map[string]string{"a": "1"}, nil},
		"add and replace": {map[string]string{"a": "1", "b": "2"}, nil, map[string]string{"b": "old"},
			[]op{{"ADD", "/remote_attributes/a", "1"}, {"REPLACE", "/remote_attributes/b", "2"}}},
		"remove only owned": {nil, owned("mine"), map[string]string{"mine": "1", "theirs": "2"},
			[]op{{"REMOVE", "/remote_attributes/mine", ""}}},
		"owned but already gone": {nil, owned("mine"), map[string]string{}, nil},
		"escaped keys": {map[string]string{"a/b": "1"}, owned("c~d"), map[string]string{"c~d": "x"},
			[]op{{"ADD", "/remote_attributes/a~1b", "1"}, {"REMOVE", "/remote_attributes/c~0d", ""}}},
		"still desired is not removed": {map[string]string{"a": "1"}, owned("a", "a"), map[string]string{"a": "1"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var got []op
			for _, o := range Diff(tc.desired, tc.previous, tc.remote) {
				got = append(got, op{o.GetOp().String(), o.GetPath(), o.GetValue()})
				if o.GetOp() == collectorv1.Operation_REMOVE {
					NewWithT(t).Expect(o.Value).To(BeNil())
				}
			}
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

func TestHandedOff(t *testing.T) {
	owned := func(pairs ...string) []fleetv1alpha1.AttributeOwner {
		var out []fleetv1alpha1.AttributeOwner
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, fleetv1alpha1.AttributeOwner{Key: pairs[i], Value: pairs[i+1], OwnerKind: fleetv1alpha1.OwnerCollector, OwnerName: "a/old"})
		}
		return out
	}
	for name, tc := range map[string]struct {
		previous  []fleetv1alpha1.AttributeOwner
		successor map[string]bool
		remote    map[string]string
		want      []string
	}{
		"no successor, unchanged":        {owned("k", "v", "j", "w"), nil, map[string]string{"k": "v", "j": "w"}, []string{"k", "j"}},
		"successor owns a key":           {owned("k", "v", "j", "w"), map[string]bool{"k": true}, map[string]string{"k": "v", "j": "w"}, []string{"j"}},
		"rewritten before status":        {owned("k", "v"), nil, map[string]string{"k": "new"}, nil},
		"already gone stays in the list": {owned("k", "v"), nil, map[string]string{}, []string{"k"}},
		"nothing owned":                  {nil, map[string]bool{"k": true}, map[string]string{"k": "v"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var keys []string
			for _, o := range HandedOff(tc.previous, tc.successor, tc.remote) {
				keys = append(keys, o.Key)
			}
			NewWithT(t).Expect(keys).To(Equal(tc.want))
		})
	}
}
