package source

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestReconcileInterval(t *testing.T) {
	for _, tc := range []struct {
		value string
		set   bool
		want  time.Duration
		err   bool
	}{
		{set: false, want: DefaultReconcileInterval},
		{value: "", set: true, want: DefaultReconcileInterval},
		{value: "90s", set: true, want: 90 * time.Second},
		{value: "0", set: true, want: 0},
		{value: "-1m", set: true, err: true},
		{value: "ten minutes", set: true, err: true},
	} {
		g := NewWithT(t)
		cm := &corev1.ConfigMap{Data: map[string]string{}}
		if tc.set {
			cm.Data[DataReconcileInterval] = tc.value
		}
		got, err := ReconcileInterval(cm)
		if tc.err {
			g.Expect(err).To(MatchError(ContainSubstring(DataReconcileInterval)), tc.value)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), tc.value)
		g.Expect(got).To(Equal(tc.want), tc.value)
	}
}

func FuzzReconcileInterval(f *testing.F) {
	for _, s := range []string{"10m", "0", "-1s", "x", "1h30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ReconcileInterval(&corev1.ConfigMap{Data: map[string]string{DataReconcileInterval: s}})
		if err == nil && d < 0 {
			t.Fatalf("%q gave a negative interval %s", s, d)
		}
	})
}
