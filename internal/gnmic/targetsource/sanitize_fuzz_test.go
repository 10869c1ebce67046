package targetsource

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func FuzzTargetName(f *testing.F) {
	for _, s := range []string{"Router1", "a..b", "路由器", "-", "x/y", string(make([]byte, 300))} {
		f.Add("inv", s)
	}
	f.Fuzz(func(t *testing.T, source, device string) {
		if len(validation.IsDNS1123Label(source)) > 0 {
			return
		}
		n := TargetName(source, device)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Fatalf("TargetName(%q, %q) = %q: %v", source, device, n, errs)
		}
		if TargetName(source, device) != n {
			t.Fatal("not deterministic")
		}
	})
}

func FuzzSanitizeLabels(f *testing.F) {
	f.Add("site", "Amsterdam Zuid")
	f.Add("example.com/rack pos", "12")
	f.Add("日本/キー", "値")
	f.Add("a/b/c", "-x-")
	f.Fuzz(func(t *testing.T, key, value string) {
		s := SanitizeLabels(map[string]string{key: value, "fixed": value}, "operator.gnmic.dev/label.")
		for k, v := range s.Labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Fatalf("key %q: %v", k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Fatalf("value %q: %v", v, errs)
			}
		}
		for k := range s.Annotations {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Fatalf("annotation key %q: %v", k, errs)
			}
		}
	})
}
