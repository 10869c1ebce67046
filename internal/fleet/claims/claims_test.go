package claims

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func col(ns, name string, age time.Duration, deleting bool) fleetv1alpha1.Collector {
	c := fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(1_000_000, 0).Add(-age))}}
	if deleting {
		now := metav1.Now()
		c.DeletionTimestamp = &now
	}
	return c
}

func TestHolder(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []fleetv1alpha1.Collector
		want string
	}{
		"none":               {nil, ""},
		"one":                {[]fleetv1alpha1.Collector{col("a", "x", 0, false)}, "a/x"},
		"oldest wins":        {[]fleetv1alpha1.Collector{col("b", "y", time.Minute, false), col("a", "x", time.Hour, false)}, "a/x"},
		"tie by key":         {[]fleetv1alpha1.Collector{col("b", "y", 0, false), col("a", "z", 0, false)}, "a/z"},
		"deleting is passed": {[]fleetv1alpha1.Collector{col("a", "x", time.Hour, true), col("b", "y", 0, false)}, "b/y"},
		"only deleting":      {[]fleetv1alpha1.Collector{col("a", "x", time.Hour, true)}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := Holder(tc.in)
			if tc.want == "" {
				NewWithT(t).Expect(got).To(BeNil())
				return
			}
			NewWithT(t).Expect(Key(got)).To(Equal(tc.want))
		})
	}
}
