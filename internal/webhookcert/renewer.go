package webhookcert

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Renewer re-runs Ensure when the serving certificate comes due, on every replica (not only the leader), so a
// long-running pod renews in place: the webhook server's certificate watcher picks up the rewritten files.
type Renewer struct {
	Client client.Client
	Config Config
	// Next is when the certificate Ensure wrote at start is due.
	Next time.Time
	// Retry is the wait after a failed renewal; zero means one minute.
	Retry time.Duration
}

// NeedLeaderElection is false: every replica serves webhooks from its own certificate directory.
func (r *Renewer) NeedLeaderElection() bool { return false }

// Start waits for each renewal until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhookcert")
	retryAfter := r.Retry
	if retryAfter == 0 {
		retryAfter = time.Minute
	}
	next := r.Next
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		due, err := Ensure(ctx, r.Client, r.Config, time.Now())
		if err != nil {
			log.Error(err, "renewing the webhook certificate; retrying", "after", retryAfter)
			next = time.Now().Add(retryAfter)
			continue
		}
		next = due
	}
}
