package pipelines

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestBackoffSince(t *testing.T) {
	first, limit := 10*time.Second, 5*time.Minute
	for waited, want := range map[time.Duration]time.Duration{
		0:                first,
		5 * time.Second:  first,
		10 * time.Second: 10 * time.Second,
		20 * time.Second: 20 * time.Second,
		40 * time.Second: 40 * time.Second,
		time.Hour:        limit,
	} {
		NewWithT(t).Expect(BackoffSince(waited, first, limit)).To(Equal(want), "waited %s", waited)
	}
}
