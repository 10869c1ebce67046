package kube_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// After a burst of failures the next retry of an object is at most RetryMaxDelay away, and a success resets it.
func TestRetryBackoffIsCapped(t *testing.T) {
	g := NewWithT(t)
	limiter := kube.ControllerOptions{}.Options().RateLimiter
	g.Expect(limiter).NotTo(BeNil())
	item := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "agent"}}
	other := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "other"}}
	g.Expect(limiter.When(item)).To(Equal(kube.RetryBaseDelay))
	for range 40 {
		limiter.When(item)
	}
	g.Expect(limiter.When(item)).To(Equal(kube.RetryMaxDelay))
	g.Expect(limiter.When(other)).To(Equal(kube.RetryBaseDelay), "per object")
	limiter.Forget(item)
	g.Expect(limiter.When(item)).To(Equal(kube.RetryBaseDelay))
}
