package kube

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retry backoff of a failed reconcile: exponential per object from RetryBaseDelay, capped at RetryMaxDelay.
// controller-runtime's default cap is 1000 s, and every failure counts, including those of reconciles that events
// triggered: an object whose reconciles failed through a burst of events (a finalizer waiting on a peer while the
// garbage collector deletes the children) would then wait many minutes after the peer recovered, with nothing
// left to wake it. Thirty seconds keeps a persistently failing object at two attempts a minute.
const (
	RetryBaseDelay = 5 * time.Millisecond
	RetryMaxDelay  = 30 * time.Second
)

// ControllerOptions are the per-controller settings the manager's flags control.
type ControllerOptions struct {
	// MaxConcurrentReconciles is how many objects the controller reconciles at once; 0 keeps the default of 1.
	MaxConcurrentReconciles int
}

// Options converts to controller-runtime's controller options.
func (o ControllerOptions) Options() controller.Options {
	return controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles, RateLimiter: RetryRateLimiter()}
}

// RetryRateLimiter is controller-runtime's default limiter (per-object exponential backoff, and an overall
// 10 per second, burst 100, token bucket) with the per-object backoff capped at RetryMaxDelay.
func RetryRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](RetryBaseDelay, RetryMaxDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
