package webhookcert

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Keeper puts the CA back into a webhook configuration's caBundle whenever the configuration changes. A GitOps
// tool or `kubectl apply` re-applying the chart's configuration resets caBundle to what the chart holds (nothing),
// and the API server then refuses every admission call until the next start or renewal; the Keeper watches the
// configurations by name (list/watch limited to those names by RBAC) and repairs them within seconds.
type Keeper struct {
	Client client.WithWatch
	Config Config
	// Retry is the wait before re-watching after an error or a closed watch; zero means five seconds.
	Retry time.Duration
}

// NeedLeaderElection is false: every replica repairs (the patch is idempotent), so a repair never waits for a
// leader election.
func (k *Keeper) NeedLeaderElection() bool { return false }

// Start watches every configuration until ctx ends.
func (k *Keeper) Start(ctx context.Context) error {
	done := make(chan struct{})
	watched := 0
	for _, name := range k.Config.ValidatingConfigurations {
		watched++
		go func() {
			defer func() { done <- struct{}{} }()
			k.keep(ctx, name, &admissionregistrationv1.ValidatingWebhookConfigurationList{},
				&admissionregistrationv1.ValidatingWebhookConfiguration{})
		}()
	}
	for _, name := range k.Config.MutatingConfigurations {
		watched++
		go func() {
			defer func() { done <- struct{}{} }()
			k.keep(ctx, name, &admissionregistrationv1.MutatingWebhookConfigurationList{},
				&admissionregistrationv1.MutatingWebhookConfiguration{})
		}()
	}
	for range watched {
		<-done
	}
	return nil
}

// keep re-watches one configuration until ctx ends. A watch without a resourceVersion starts with the object's
// current state, so a change missed while re-watching is seen on the next watch's first event.
func (k *Keeper) keep(ctx context.Context, name string, list client.ObjectList, obj client.Object) {
	log := logf.FromContext(ctx).WithName("webhookcert").WithValues("configuration", name)
	retryAfter := k.Retry
	if retryAfter == 0 {
		retryAfter = 5 * time.Second
	}
	for {
		if err := k.watchOnce(ctx, name, list, obj); err != nil && ctx.Err() == nil {
			log.Error(err, "keeping the webhook configuration's caBundle; retrying", "after", retryAfter)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryAfter):
		}
	}
}

func (k *Keeper) watchOnce(ctx context.Context, name string, list client.ObjectList, obj client.Object) error {
	w, err := k.Client.Watch(ctx, list, client.MatchingFields{"metadata.name": name})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, open := <-w.ResultChan():
			if !open {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if err := k.repair(ctx, name, obj.DeepCopyObject().(client.Object)); err != nil {
					return err
				}
			case watch.Error:
				return fmt.Errorf("watch: %v", ev.Object)
			}
		}
	}
}

// repair patches caBundle from the Secret's CA (a no-op when it is already there).
func (k *Keeper) repair(ctx context.Context, name string, obj client.Object) error {
	secret := &corev1.Secret{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: k.Config.Namespace, Name: k.Config.SecretName}, secret); err != nil {
		return fmt.Errorf("webhook certificate Secret %s/%s: %w", k.Config.Namespace, k.Config.SecretName, err)
	}
	ca := secret.Data[KeyCACert]
	if len(ca) == 0 {
		return fmt.Errorf("webhook certificate Secret %s/%s has no %s", k.Config.Namespace, k.Config.SecretName, KeyCACert)
	}
	return patchCABundle(ctx, k.Client, obj, name, ca)
}
